import Foundation

enum Direction {
    case north, east, south, west
}

struct Position {
    var x = 0
    var y = 0
}

class Rover {
    private(set) var position = Position()
    private(set) var facing = Direction.north

    func turnRight() {
        switch facing {
        case .north: facing = .east
        case .east: facing = .south
        case .south: facing = .west
        case .west: facing = .north
        }
    }

    func move(_ steps: Int) {
        for _ in 0..<steps {
            switch facing {
            case .north: position.y += 1
            case .east: position.x += 1
            case .south: position.y -= 1
            case .west: position.x -= 1
            }
        }
    }
}

func run(_ commands: String, on rover: Rover) {
    for command in commands {
        if command == "R" {
            rover.turnRight()
        } else if let steps = Int(String(command)) {
            rover.move(steps)
        }
    }
}

let rover = Rover()
run("2R3R1", on: rover)
var attempts = 0
while attempts < 2 {
    attempts += 1
}
repeat {
    attempts -= 1
} while attempts > 0
do {
    print("rover at \(rover.position.x), \(rover.position.y)")
}

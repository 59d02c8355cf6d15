enum Level {
  Debug,
  Info,
  Warning,
  Error,
}

interface Entry {
  level: Level;
  message: string;
  at: Date;
}

namespace Format {
  export function line(entry: Entry): string {
    return `${entry.at.toISOString()} ${Level[entry.level]} ${entry.message}`;
  }
}

type Sink = (line: string) => void;

class Logger {
  private entries: Entry[] = [];

  constructor(private readonly threshold: Level, private readonly sink: Sink) {}

  log(level: Level, message: string): void {
    if (level < this.threshold) {
      return;
    }
    const entry = { level, message, at: new Date() };
    this.entries.push(entry);
    this.sink(Format.line(entry));
  }

  count(level: Level): number {
    let n = 0;
    for (const entry of this.entries) {
      if (entry.level === level) n += 1;
    }
    return n;
  }
}

function severity(level: Level): string {
  switch (level) {
    case Level.Error:
      return "page someone";
    default:
      return "read later";
  }
}

const lines: string[] = [];
let logger = new Logger(Level.Info, (line) => lines.push(line));
var attempts = 0;
while (attempts < 3) {
  logger.log(attempts === 2 ? Level.Error : Level.Debug, `attempt ${attempts}`);
  attempts += 1;
}
export { Logger, Level, severity };

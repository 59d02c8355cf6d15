package org.example.shapes

import kotlin.math.PI
import kotlin.math.sqrt

sealed class Shape {
    abstract fun area(): Double
}

class Circle(private val radius: Double) : Shape() {
    override fun area() = PI * radius * radius
}

class Triangle(private val a: Double, private val b: Double, private val c: Double) : Shape() {
    override fun area(): Double {
        val s = (a + b + c) / 2
        return sqrt(s * (s - a) * (s - b) * (s - c))
    }
}

internal class Registry {
    private val shapes = mutableListOf<Shape>()
    fun add(shape: Shape) = shapes.add(shape)
    fun total() = shapes.sumOf { it.area() }
    companion object {
        fun of(vararg shapes: Shape) = Registry().apply { shapes.forEach { add(it) } }
    }
}

private fun label(area: Double): String =
    when {
        area < 1.0 -> "tiny"
        area < 10.0 -> "small"
        else -> "large"
    }

public fun main() {
    val registry = Registry.of(Circle(1.0), Triangle(3.0, 4.0, 5.0))
    var total = registry.total()
    if (total > 100.0) {
        println("too large")
    }
    else {
        println("total ${label(total)}: $total")
    }
    for (i in 1..3) {
        total /= 2
    }
    while (total > 1.0) {
        total -= 1.0
    }
    println(total)
}

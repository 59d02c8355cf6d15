package example.stats

import scala.collection.mutable

object Sample {
  case class Reading(sensor: String, value: Double)

  class Window(size: Int) {
    private val values = mutable.Queue.empty[Double]

    def add(value: Double): Unit = {
      values.enqueue(value)
      if (values.size > size) values.dequeue()
    }

    def mean: Option[Double] =
      if (values.isEmpty) None else Some(values.sum / values.size)
  }

  def classify(value: Double): String = value match {
    case v if v < 0 => "negative"
    case 0.0 => "zero"
    case _ => "positive"
  }

  val windows = mutable.Map.empty[String, Window]
  var seen = 0

  def record(reading: Reading): Unit = {
    windows.getOrElseUpdate(reading.sensor, new Window(3)).add(reading.value)
    seen += 1
  }

  def main(args: Array[String]): Unit = {
    val readings = Seq(Reading("a", 1.0), Reading("b", -2.0), Reading("a", 3.0))
    for (reading <- readings) {
      record(reading)
    }
    while (seen > 10) {
      seen -= 10
    }
    windows.foreach { case (sensor, window) =>
      println(s"$sensor: ${window.mean.map(classify).getOrElse("none")}")
    }
  }
}

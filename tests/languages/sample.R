# Summaries of a numeric sample, with an S4 class for the result.
library(stats)
require(utils)

setClass("Summary", representation(n = "numeric", mean = "numeric", sd = "numeric"))

setGeneric("describe", function(object, ...) standardGeneric("describe"))

setMethod("describe", "Summary", function(object, ...) {
  cat(sprintf("n = %d, mean = %.3f, sd = %.3f\n", object@n, object@mean, object@sd))
  invisible(object)
})

summarise <- function(x) {
  x <- x[!is.na(x)]
  if (length(x) == 0) {
    stop("no values")
  }
  new("Summary", n = length(x), mean = mean(x), sd = sd(x))
}

bootstrap <- function(x, times = 200) {
  means <- numeric(times)
  for (i in seq_len(times)) {
    means[i] <- mean(sample(x, replace = TRUE))
  }
  means
}

clamp <- function(x, low, high) {
  if (x < low) low
  else if (x > high) high
  else x
}

set.seed(1)
values <- c(rnorm(50, mean = 10), NA, 12.5)
result <- summarise(values)
describe(result)
i <- 0
while (i < 3) {
  i <- i + 1
}
repeat {
  i <- i - 1
  if (i <= 0) break
}
print(quantile(bootstrap(values[!is.na(values)]), c(0.025, 0.975)))
print(clamp(result@mean, 0, 11))

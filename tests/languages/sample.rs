//! A token bucket rate limiter.
use std::time::{Duration, Instant};

const DEFAULT_RATE: f64 = 10.0;

pub struct Bucket {
    capacity: f64,
    tokens: f64,
    rate: f64,
    last: Instant,
}

impl Bucket {
    pub fn new(capacity: f64, rate: f64) -> Self {
        Bucket { capacity, tokens: capacity, rate, last: Instant::now() }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.capacity);
        self.last = now;
    }

    pub fn take(&mut self, n: f64) -> Result<(), Duration> {
        self.refill(Instant::now());
        if self.tokens >= n {
            self.tokens -= n;
            return Ok(());
        }
        let missing = n - self.tokens;
        Err(Duration::from_secs_f64(missing / self.rate))
    }
}

fn describe(result: &Result<(), Duration>) -> String {
    match result {
        Ok(()) => "allowed".to_string(),
        Err(wait) => format!("wait {:?}", wait),
    }
}

fn main() {
    let mut bucket = Bucket::new(3.0, DEFAULT_RATE);
    let mut allowed = 0;
    for _ in 0..5 {
        let result = bucket.take(1.0);
        if result.is_ok() {
            allowed += 1;
        }
        println!("{}", describe(&result));
    }
    while allowed > 0 {
        allowed -= 1;
    }
    loop {
        if bucket.take(1.0).is_err() {
            break;
        }
    }
}

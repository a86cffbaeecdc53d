//! Key distributions: which entry each request targets.
//!
//! * `uniform`: every key in `min..=max` equally likely;
//! * `sequential`: `min, min+1, …, max`, then again from `min` (each
//!   session starts at its own offset, so sessions do not walk in step);
//! * `zipf`: key `min + k - 1` with probability ∝ 1/k^s (a few hot keys,
//!   a long tail), drawn by rejection-inversion (Hörmann and Derflinger,
//!   1996) in constant time and memory whatever the key count;
//! * `array`: seed 000's method: `array_size` keys drawn uniformly once
//!   per run, then requests pick from that array at random.

use serde::{Deserialize, Serialize};

use crate::rng::Rng;

/// The distribution as a scenario names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Every key equally likely.
    #[default]
    Uniform,
    /// Keys in order.
    Sequential,
    /// Zipf's law.
    Zipf,
    /// A pre-drawn random array.
    Array,
}

/// The `[keys]` table of a scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KeySpec {
    /// Which distribution.
    pub distribution: Kind,
    /// Smallest key.
    pub min: u64,
    /// Largest key.
    pub max: u64,
    /// Zipf exponent `s` (> 0).
    pub zipf_exponent: f64,
    /// Size of the pre-drawn array.
    pub array_size: usize,
    /// Seed of the run's random numbers; 0 draws one from the clock.
    pub seed: u64,
}

impl Default for KeySpec {
    fn default() -> Self {
        KeySpec {
            distribution: Kind::Uniform,
            min: 0,
            max: 9_999,
            zipf_exponent: 1.0,
            array_size: 100_000,
            seed: 0,
        }
    }
}

/// Largest pre-drawn array (8 bytes a key).
pub const MAX_ARRAY_SIZE: usize = 100_000_000;

impl KeySpec {
    /// Checks the numbers; the message says which one is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.min > self.max {
            return Err(format!("keys: min {} is above max {}", self.min, self.max));
        }
        if self.distribution == Kind::Zipf
            && !(self.zipf_exponent > 0.0 && self.zipf_exponent.is_finite())
        {
            return Err(format!(
                "keys: zipf_exponent must be above 0, not {}",
                self.zipf_exponent
            ));
        }
        if self.distribution == Kind::Array && !(1..=MAX_ARRAY_SIZE).contains(&self.array_size) {
            return Err(format!(
                "keys: array_size must be 1..={MAX_ARRAY_SIZE}, not {}",
                self.array_size
            ));
        }
        Ok(())
    }
}

/// A distribution ready to draw, shared by a run's sessions (the array
/// is drawn once); each session draws through its own [`KeyStream`].
#[derive(Debug)]
pub struct Keys(Dist);

#[derive(Debug)]
enum Dist {
    Uniform { min: u64, span: u64 },
    Sequential { min: u64, span: u64 },
    Zipf { min: u64, zipf: Zipf },
    Array(Vec<u64>),
}

impl Keys {
    /// Prepares `spec`, drawing the array (if any) from `rng`.
    pub fn new(spec: &KeySpec, rng: &mut Rng) -> Keys {
        let span = spec.max - spec.min;
        Keys(match spec.distribution {
            Kind::Uniform => Dist::Uniform {
                min: spec.min,
                span,
            },
            Kind::Sequential => Dist::Sequential {
                min: spec.min,
                span,
            },
            Kind::Zipf => Dist::Zipf {
                min: spec.min,
                zipf: Zipf::new(span.saturating_add(1), spec.zipf_exponent),
            },
            Kind::Array => Dist::Array(
                (0..spec.array_size)
                    .map(|_| spec.min + draw_inclusive(rng, span))
                    .collect(),
            ),
        })
    }

    /// A stream for session `session`.
    pub fn stream(&self, session: u64) -> KeyStream<'_> {
        let offset = match &self.0 {
            // Sessions start spread over the key range.
            Dist::Sequential { span, .. } => {
                session.wrapping_mul(0x9e37_79b9_7f4a_7c15) % span.saturating_add(1).max(1)
            }
            _ => 0,
        };
        KeyStream {
            keys: self,
            next: offset,
        }
    }
}

/// One session's draws.
#[derive(Debug)]
pub struct KeyStream<'k> {
    keys: &'k Keys,
    next: u64,
}

impl KeyStream<'_> {
    /// The next key.
    pub fn draw(&mut self, rng: &mut Rng) -> u64 {
        match &self.keys.0 {
            Dist::Uniform { min, span } => min + draw_inclusive(rng, *span),
            Dist::Sequential { min, span } => {
                let key = min + self.next;
                self.next = if self.next >= *span { 0 } else { self.next + 1 };
                key
            }
            Dist::Zipf { min, zipf } => min + zipf.sample(rng) - 1,
            Dist::Array(keys) => {
                let i = rng.below(keys.len() as u64) as usize;
                keys.get(i).copied().unwrap_or(0)
            }
        }
    }
}

fn draw_inclusive(rng: &mut Rng, span: u64) -> u64 {
    if span == u64::MAX {
        rng.next_u64()
    } else {
        rng.below(span + 1)
    }
}

/// Zipf's law over `1..=n` by rejection-inversion: a sample costs a few
/// `exp`/`ln` and is accepted on the first try almost always.
#[derive(Debug, Clone)]
pub struct Zipf {
    n: f64,
    s: f64,
    h_x1: f64,
    h_n: f64,
    threshold: f64,
}

impl Zipf {
    /// The law with exponent `s` over `1..=n` (`n` ≥ 1).
    pub fn new(n: u64, s: f64) -> Zipf {
        let n = n.max(1) as f64;
        let h_x1 = h_integral(1.5, s) - 1.0;
        let h_n = h_integral(n + 0.5, s);
        let threshold = 2.0 - h_integral_inverse(h_integral(2.5, s) - h(2.0, s), s);
        Zipf {
            n,
            s,
            h_x1,
            h_n,
            threshold,
        }
    }

    /// A value in `1..=n`.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.h_n + rng.unit() * (self.h_x1 - self.h_n);
            let x = h_integral_inverse(u, self.s);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.threshold || u >= h_integral(k + 0.5, self.s) - h(k, self.s) {
                return k as u64;
            }
        }
    }
}

/// `1/x^s`.
fn h(x: f64, s: f64) -> f64 {
    (-s * x.ln()).exp()
}

/// An antiderivative of `h`: `(x^(1-s) - 1) / (1-s)`, written so that it
/// stays exact near `s = 1` (where it tends to `ln x`).
fn h_integral(x: f64, s: f64) -> f64 {
    let log_x = x.ln();
    expm1_over_x((1.0 - s) * log_x) * log_x
}

fn h_integral_inverse(x: f64, s: f64) -> f64 {
    let t = (x * (1.0 - s)).max(-1.0);
    (ln1p_over_x(t) * x).exp()
}

/// `(e^x - 1) / x`, 1 at 0.
fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0)
    }
}

/// `ln(1 + x) / x`, 1 at 0.
fn ln1p_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x / 3.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(distribution: Kind, min: u64, max: u64) -> KeySpec {
        KeySpec {
            distribution,
            min,
            max,
            ..KeySpec::default()
        }
    }

    fn counts(keys: &Keys, draws: usize, buckets: usize, min: u64) -> Vec<usize> {
        let mut rng = Rng::new(42);
        let mut stream = keys.stream(0);
        let mut counts = vec![0; buckets];
        for _ in 0..draws {
            counts[(stream.draw(&mut rng) - min) as usize] += 1;
        }
        counts
    }

    /// Pearson's chi-squared statistic against `expected` probabilities.
    fn chi_squared(counts: &[usize], expected: &[f64]) -> f64 {
        let total: usize = counts.iter().sum();
        counts
            .iter()
            .zip(expected)
            .map(|(&c, &p)| {
                let e = p * total as f64;
                (c as f64 - e).powi(2) / e
            })
            .sum()
    }

    #[test]
    fn uniform_passes_chi_squared() {
        let keys = Keys::new(&spec(Kind::Uniform, 100, 119), &mut Rng::new(1));
        let counts = counts(&keys, 200_000, 20, 100);
        // 19 degrees of freedom: 43.8 is the 0.1 % critical value.
        let chi = chi_squared(&counts, &[1.0 / 20.0; 20]);
        assert!(chi < 43.8, "chi² {chi}, counts {counts:?}");
    }

    #[test]
    fn zipf_matches_its_law() {
        for s in [0.8, 1.0, 1.5] {
            let n = 50;
            let keys = Keys::new(
                &KeySpec {
                    zipf_exponent: s,
                    ..spec(Kind::Zipf, 1, n)
                },
                &mut Rng::new(1),
            );
            let counts = counts(&keys, 300_000, n as usize, 1);
            let weights: Vec<f64> = (1..=n).map(|k| 1.0 / (k as f64).powf(s)).collect();
            let total: f64 = weights.iter().sum();
            let expected: Vec<f64> = weights.iter().map(|w| w / total).collect();
            // 49 degrees of freedom: 85.4 is the 0.1 % critical value.
            let chi = chi_squared(&counts, &expected);
            assert!(chi < 85.4, "s={s}: chi² {chi}, counts {counts:?}");
        }
    }

    #[test]
    fn zipf_stays_in_range_for_huge_key_counts() {
        let zipf = Zipf::new(1_000_000_000_000, 1.0);
        let mut rng = Rng::new(3);
        for _ in 0..10_000 {
            let k = zipf.sample(&mut rng);
            assert!((1..=1_000_000_000_000).contains(&k));
        }
    }

    #[test]
    fn sequential_walks_and_wraps() {
        let keys = Keys::new(&spec(Kind::Sequential, 5, 8), &mut Rng::new(1));
        let mut stream = keys.stream(0);
        let mut rng = Rng::new(1);
        let drawn: Vec<u64> = (0..6).map(|_| stream.draw(&mut rng)).collect();
        assert_eq!(drawn, [5, 6, 7, 8, 5, 6]);
    }

    #[test]
    fn array_draws_only_its_keys_and_spans_the_range() {
        let spec = KeySpec {
            array_size: 1000,
            ..spec(Kind::Array, 0, 999_999)
        };
        let keys = Keys::new(&spec, &mut Rng::new(5));
        let Dist::Array(array) = &keys.0 else {
            unreachable!()
        };
        let set: std::collections::HashSet<u64> = array.iter().copied().collect();
        assert!(set.len() > 990, "the array should hold distinct draws");
        assert!(array.iter().any(|&k| k < 100_000) && array.iter().any(|&k| k > 900_000));
        let mut stream = keys.stream(0);
        let mut rng = Rng::new(6);
        assert!((0..10_000).all(|_| set.contains(&stream.draw(&mut rng))));
    }

    #[test]
    fn bad_specs_are_refused() {
        assert!(spec(Kind::Uniform, 5, 4).validate().is_err());
        let zipf = KeySpec {
            zipf_exponent: 0.0,
            ..spec(Kind::Zipf, 0, 9)
        };
        assert!(zipf.validate().unwrap_err().contains("zipf_exponent"));
        let array = KeySpec {
            array_size: 0,
            ..spec(Kind::Array, 0, 9)
        };
        assert!(array.validate().is_err());
    }
}

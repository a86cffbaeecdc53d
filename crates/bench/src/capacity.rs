//! Seed 003's capacity model: run each operation of a user profile alone
//! at several offered rates, read the server's CPU time from `/proc`, fit
//! CPU seconds per second against operations per second by least squares
//! (the slope is the CPU cost of one operation, the intercept the idle
//! cost), then compute how many users of the profile the server carries
//! at the target utilisation:
//!
//! ```text
//! users = utilisation × CPUs / Σ (operations per user per second × cost)
//! ```

use std::fmt::Write as _;

use anyhow::bail;
use serde::{Deserialize, Serialize};

use crate::procstat;
use crate::run::{self, Options, RunResult};
use crate::scenario::Scenario;

/// One operation's measured cost.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OperationCost {
    /// Operation name.
    pub name: String,
    /// Profile frequency: operations per user per second.
    pub per_user: f64,
    /// (achieved operations per second, server CPU seconds per second).
    pub points: Vec<(f64, f64)>,
    /// Fitted CPU milliseconds per operation (the slope).
    pub cost_ms: f64,
    /// Fitted CPU seconds per second at no load (the intercept).
    pub idle: f64,
    /// Coefficient of determination of the fit.
    pub r_squared: f64,
}

/// The model.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CapacityResult {
    /// Per operation.
    pub operations: Vec<OperationCost>,
    /// CPUs the capacity is computed for.
    pub cpus: f64,
    /// Utilisation it is computed at.
    pub utilisation: f64,
    /// CPU milliseconds one user of the profile costs per second.
    pub cost_per_user_ms: f64,
    /// Users the server carries at `utilisation` (None without a profile).
    pub users: Option<f64>,
}

impl CapacityResult {
    /// The model as the seed prints it.
    pub fn to_text(&self) -> String {
        let mut out = String::from("Capacity model (server CPU per operation, least squares)\n");
        let _ = writeln!(
            out,
            "  {:<14} {:>12} {:>14} {:>10} {:>6}",
            "operation", "per user/s", "CPU ms / op", "idle CPU", "r^2"
        );
        for op in &self.operations {
            let _ = writeln!(
                out,
                "  {:<14} {:>12.4} {:>14.4} {:>10.3} {:>6.3}",
                op.name, op.per_user, op.cost_ms, op.idle, op.r_squared
            );
        }
        let profiled = self.operations.iter().any(|o| o.per_user > 0.0);
        match self.users {
            Some(users) => {
                let _ = writeln!(
                    out,
                    "  one user costs {:.4} CPU ms per second; at {:.0} % of {} CPUs the server supports {:.0} concurrent users",
                    self.cost_per_user_ms,
                    self.utilisation * 100.0,
                    self.cpus,
                    users
                );
            }
            // The CPU clock counts in ticks (10 ms): short or light steps
            // fit a slope of noise, which may come out negative.
            None if profiled => {
                let _ = writeln!(
                    out,
                    "  the fitted costs add up to {:.4} CPU ms per user per second, not a positive cost: \
                     the steps were too short or too light to measure; raise [capacity] rates or step_secs",
                    self.cost_per_user_ms
                );
            }
            None => {}
        }
        out
    }
}

/// Users of the profile the server carries at `utilisation` of `cpus`,
/// when one costs `cost_per_user_ms` (`None` without a profile, or when
/// the fitted cost is not positive).
pub fn users_at(utilisation: f64, cpus: f64, cost_per_user_ms: Option<f64>) -> Option<f64> {
    cost_per_user_ms
        .filter(|&cost| cost > 0.0)
        .map(|cost| utilisation * cpus * 1000.0 / cost)
}

/// Least squares fit of `y = a + b x`: (a, b, r²).
pub fn fit(points: &[(f64, f64)]) -> (f64, f64, f64) {
    let n = points.len() as f64;
    if points.len() < 2 {
        return (
            0.0,
            points
                .first()
                .map_or(0.0, |(x, y)| if *x > 0.0 { y / x } else { 0.0 }),
            0.0,
        );
    }
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let syy: f64 = points.iter().map(|p| (p.1 - mean_y).powi(2)).sum();
    if sxx == 0.0 {
        return (mean_y, 0.0, 0.0);
    }
    let b = sxy / sxx;
    let a = mean_y - b * mean_x;
    let r2 = if syy == 0.0 {
        1.0
    } else {
        (sxy * sxy) / (sxx * syy)
    };
    (a, b, r2)
}

/// Runs the model for `scenario` against the server process `pid`.
pub fn measure(
    scenario: &Scenario,
    pid: u32,
    options: Options,
) -> anyhow::Result<(Vec<RunResult>, CapacityResult)> {
    if procstat::cpu_seconds(pid).is_none() {
        bail!(
            "cannot read /proc/{pid}/stat: the capacity model needs the server's PID on this machine"
        );
    }
    let spec = &scenario.capacity;
    if spec.rates.is_empty() || spec.rates.iter().any(|r| r.is_nan() || *r <= 0.0) {
        bail!("capacity.rates must list offered rates above 0");
    }
    let profiled = scenario.operations.iter().any(|o| o.per_user > 0.0);
    let mut runs = Vec::new();
    let mut operations = Vec::new();
    for (i, op) in scenario.operations.iter().enumerate() {
        if profiled && op.per_user == 0.0 {
            continue;
        }
        let mut points = Vec::new();
        let name = scenario
            .compile()
            .map_err(anyhow::Error::msg)?
            .get(i)
            .map(|o| o.name.clone())
            .unwrap_or_default();
        for &rate in &spec.rates {
            let mut alone = scenario.clone();
            let mut single = op.clone();
            single.name = Some(name.clone());
            (single.per_user, single.rate, single.weight) = (0.0, 0.0, 1.0);
            alone.operations = vec![single];
            alone.load.rate = rate;
            alone.load.users = 0;
            alone.load.count = 0;
            alone.load.duration_secs = spec.step_secs;
            alone.load.warmup_secs = alone.load.warmup_secs.min(2.0);
            alone.load.server_pid = Some(pid);
            let result = run::run(&alone, &format!("{name} at {rate}/s"), options.clone())?;
            if let Some(server) = &result.server {
                points.push((result.total.rate, server.cpu_seconds / result.elapsed_secs));
            }
            runs.push(result);
        }
        let (idle, slope, r_squared) = fit(&points);
        operations.push(OperationCost {
            name,
            per_user: op.per_user,
            points,
            cost_ms: slope * 1000.0,
            idle,
            r_squared,
        });
    }
    let cpus = if spec.cpus > 0.0 {
        spec.cpus
    } else {
        procstat::cpus() as f64
    };
    Ok((
        runs,
        model(operations, cpus, spec.target_utilisation, profiled),
    ))
}

/// The users a server carries, from each operation's fitted cost.
fn model(
    operations: Vec<OperationCost>,
    cpus: f64,
    utilisation: f64,
    profiled: bool,
) -> CapacityResult {
    let cost_per_user_ms: f64 = operations.iter().map(|o| o.per_user * o.cost_ms).sum();
    CapacityResult {
        users: users_at(utilisation, cpus, profiled.then_some(cost_per_user_ms)),
        operations,
        cpus,
        utilisation,
        cost_per_user_ms,
    }
}

/// The model fitted from runs already made (the console's chosen runs):
/// each run with the server's CPU time is a point of the operation it ran
/// alone (or of its mix, named by the scenario, when it ran several).
/// `per_user` gives an operation's profile frequency (none: no users).
pub fn from_runs(
    runs: &[RunResult],
    per_user: &dyn Fn(&str) -> f64,
    cpus: f64,
    utilisation: f64,
) -> CapacityResult {
    let mut operations: Vec<OperationCost> = Vec::new();
    for run in runs {
        let Some(server) = &run.server else { continue };
        let name = match run.operations.as_slice() {
            [only] => only.name.clone(),
            _ => format!("{} (mix)", run.scenario),
        };
        let point = (
            run.total.rate,
            server.cpu_seconds / run.elapsed_secs.max(1e-9),
        );
        match operations.iter_mut().find(|o| o.name == name) {
            Some(op) => op.points.push(point),
            None => operations.push(OperationCost {
                per_user: per_user(&name),
                name,
                points: vec![point],
                cost_ms: 0.0,
                idle: 0.0,
                r_squared: 0.0,
            }),
        }
    }
    for op in &mut operations {
        let (idle, slope, r_squared) = fit(&op.points);
        (op.idle, op.cost_ms, op.r_squared) = (idle, slope * 1000.0, r_squared);
    }
    let profiled = operations.iter().any(|o| o.per_user > 0.0);
    model(operations, cpus, utilisation, profiled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_squares_recovers_a_line() {
        let points: Vec<(f64, f64)> = [100.0, 200.0, 400.0, 800.0]
            .iter()
            .map(|x| (*x, 0.05 + 0.0002 * x))
            .collect();
        let (a, b, r2) = fit(&points);
        assert!((a - 0.05).abs() < 1e-9 && (b - 0.0002).abs() < 1e-12 && (r2 - 1.0).abs() < 1e-9);
        let noisy = [(1.0, 1.0), (2.0, 3.0), (3.0, 2.0)];
        let (_, b, r2) = fit(&noisy);
        assert!((b - 0.5).abs() < 1e-9 && r2 < 1.0);
    }

    #[test]
    fn users_follow_the_profile() {
        let result = CapacityResult {
            operations: vec![],
            cpus: 2.0,
            utilisation: 0.8,
            cost_per_user_ms: 0.4,
            users: users_at(0.8, 2.0, Some(0.4)),
        };
        assert!(result.to_text().contains("supports 4000 concurrent users"));
        assert_eq!(users_at(0.8, 2.0, None), None);
    }

    #[test]
    fn a_cost_of_noise_counts_no_users_and_says_why() {
        let op = |per_user, cost_ms| OperationCost {
            name: "op".into(),
            per_user,
            points: vec![],
            cost_ms,
            idle: 0.0,
            r_squared: 0.0,
        };
        let cost = 0.01 * -0.5 + 0.002 * 0.75;
        let result = CapacityResult {
            operations: vec![op(0.01, -0.5), op(0.002, 0.75)],
            cpus: 2.0,
            utilisation: 0.8,
            cost_per_user_ms: cost,
            users: users_at(0.8, 2.0, Some(cost)),
        };
        assert_eq!(result.users, None);
        let text = result.to_text();
        assert!(text.contains("not a positive cost"), "{text}");
        assert!(!text.contains("concurrent users"), "{text}");
    }
}

//! One bounded pool for all password work: bind checks (users and the
//! administrator), the hashing of passwords written, and Password
//! Modify's old-password check. Each is memory- and CPU-hard by design,
//! so they share one limit of one job per CPU: however many clients bind
//! or write passwords at once, the server never runs more hashes than it
//! has cores, and what waits holds no thread.

use std::sync::Arc;

use tokio::sync::Semaphore;

/// A permit-guarded way onto tokio's blocking pool.
#[derive(Debug, Clone)]
pub(crate) struct PasswordPool {
    permits: Arc<Semaphore>,
}

impl PasswordPool {
    /// A pool running at most `jobs` password jobs at once.
    pub(crate) fn new(jobs: usize) -> PasswordPool {
        PasswordPool {
            permits: Arc::new(Semaphore::new(jobs.max(1))),
        }
    }

    /// One job per CPU.
    pub(crate) fn per_cpu() -> PasswordPool {
        PasswordPool::new(std::thread::available_parallelism().map_or(1, usize::from))
    }

    /// Runs `work` on the blocking pool once a permit is free; `None` if
    /// the job panicked or the pool was closed.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let _permit = self.permits.acquire().await.ok()?;
        tokio::task::spawn_blocking(work).await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn never_more_jobs_than_permits_at_once() {
        let pool = PasswordPool::new(2);
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let jobs: Vec<_> = (0..12)
            .map(|_| {
                let (pool, running, most) = (pool.clone(), Arc::clone(&running), Arc::clone(&most));
                tokio::spawn(async move {
                    pool.run(move || {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        running.fetch_sub(1, Ordering::SeqCst);
                    })
                    .await
                })
            })
            .collect();
        for job in jobs {
            assert_eq!(job.await.unwrap(), Some(()));
        }
        assert_eq!(most.load(Ordering::SeqCst), 2);
    }
}

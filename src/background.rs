//! Threads for work kin does beside answering its client.

/// Runs `work` on a thread of its own named `name`, at the lowest priority (nice 19; on
/// Linux nice is per thread), so that it only takes a core the client's work leaves free.
pub(crate) fn spawn(name: &str, work: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            lower_priority();
            work();
        })
        .map(drop)
}

fn lower_priority() {
    // SAFETY: `setpriority` only takes integers; `who = 0` is the calling thread.
    let status = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) };
    if status != 0 {
        tracing::debug!("could not lower the priority of a background thread");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn work_runs_on_a_named_thread_at_the_lowest_priority() {
        let (done, ran) = std::sync::mpsc::channel();
        super::spawn("kin-test-background", move || {
            let name = std::thread::current().name().map(str::to_owned);
            // SAFETY: `getpriority` only takes integers.
            let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
            let _ = done.send((name, nice));
        })
        .unwrap();
        let (name, nice) = ran.recv().unwrap();
        assert_eq!(name.as_deref(), Some("kin-test-background"));
        assert_eq!(nice, 19);
    }
}

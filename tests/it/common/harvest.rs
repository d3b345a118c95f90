//! Collecting the session logs a scenario run left behind, in a stable order.

use std::path::Path;

use kin::session::parse_log;

/// The session logs a run left in `home`, in the order the sessions were created (ties: in the
/// order `stdout` first names them). Returns (id, file text).
pub fn harvest_logs(home: &Path, stdout: &[String]) -> Result<Vec<(String, String)>, String> {
    let mut logs = Vec::new();
    for dir in [home.join("sessions"), home.join("sessions/children")] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                let header = parse_log(&path, text.as_bytes())
                    .map(|log| (log.header.id.clone(), log.header.created_at))
                    .map_err(|e| e.to_string())?;
                logs.push((header, text));
            }
        }
    }
    // Creation order: what replay binds scripts by (a session's `createdAt` is unique and
    // increasing within a process). Sessions of two processes (an ACP kin child's own and its
    // parent's record of it) may tie: the one stdout names first comes first.
    let joined = stdout.join("\n");
    let first_seen = |id: &str| joined.find(id).unwrap_or(usize::MAX);
    logs.sort_by(|((a, at), _), ((b, bt), _)| {
        at.cmp(bt)
            .then(first_seen(a).cmp(&first_seen(b)))
            .then(a.cmp(b))
    });
    Ok(logs.into_iter().map(|((id, _), text)| (id, text)).collect())
}

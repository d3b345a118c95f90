//! The index's unit tests (kept apart: `index.rs` is long enough).

use super::*;

fn summary_of(path: &Path) -> Option<SessionSummary> {
    let id = path.file_stem()?.to_str()?.to_owned();
    Some(SessionSummary {
        id,
        cwd: None,
        additional_directories: Vec::new(),
        title: None,
        updated_ms: 0,
        updated_ns: 1,
        parent_session: None,
        child: None,
        started_over: None,
    })
}

fn set_dir_time(dir: &Path, time: SystemTime) {
    File::open(dir).unwrap().set_modified(time).unwrap();
}

fn ids(dir: &Path) -> Vec<String> {
    let fresh = IndexCache::default();
    let listed = list(&fresh, dir, None, summary_of).unwrap();
    listed.into_iter().map(|s| s.id).collect()
}

#[test]
fn a_fresh_reader_trusts_the_stamp_until_the_directory_changes() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path();
    fs::write(dir.join("a.jsonl"), "").unwrap();
    let past = UNIX_EPOCH + Duration::from_secs(1_600_000_000);
    set_dir_time(dir, past);
    assert_eq!(ids(dir), ["a"]);
    let index = fs::read_to_string(dir.join(INDEX_FILE)).unwrap();
    assert!(index.contains("dirModifiedNs"), "{index}");

    // A file added behind the index's back, the directory's time put back: not scanned.
    fs::write(dir.join("b.jsonl"), "").unwrap();
    set_dir_time(dir, past);
    assert_eq!(ids(dir), ["a"]);
    // Once the time moves, the next reader scans and finds it.
    set_dir_time(dir, past + Duration::from_secs(1));
    assert_eq!(ids(dir), ["a", "b"]);
}

#[test]
fn a_recent_directory_time_is_not_trusted() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path();
    fs::write(dir.join("a.jsonl"), "").unwrap();
    let future = SystemTime::now() + Duration::from_secs(3600);
    set_dir_time(dir, future);
    let cache = IndexCache::default();
    assert_eq!(list(&cache, dir, None, summary_of).unwrap().len(), 1);
    // Same time, yet a new file is seen: the time was too recent to stamp.
    fs::write(dir.join("b.jsonl"), "").unwrap();
    set_dir_time(dir, future);
    assert_eq!(list(&cache, dir, None, summary_of).unwrap().len(), 2);
}

fn entry(id: &str, updated_ns: u64) -> Record {
    Record {
        id: id.to_owned(),
        updated_ns,
        ..Record::default()
    }
}

/// Every page after `from` of `cache`, up to `limit` sessions each.
fn walk(cache: &IndexCache, dir: &Path, limit: usize) -> Vec<String> {
    let (mut walked, mut from) = (Vec::new(), None);
    loop {
        let (page, more) = page(cache, dir, None, from.as_ref(), limit, summary_of).unwrap();
        from = page
            .last()
            .map(|last| ListCursor::new(last.updated_ns as u64, last.id.clone()));
        walked.extend(page.into_iter().map(|s| s.id));
        if !more {
            return walked;
        }
    }
}

#[test]
fn a_sorted_index_is_paged_lazily_as_the_full_fold_lists_it() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path();
    let index = dir.join(INDEX_FILE);
    let mut records: Vec<Record> = (0..2000).map(|n| entry(&format!("s{n:04}"), n)).collect();
    for record in &records {
        fs::write(dir.join(format!("{}.jsonl", record.id)), "").unwrap();
    }
    records.sort_by_key(Record::cursor);
    rewrite(&index, records.iter()).unwrap();
    // After the sorted part: one session moves to the front, the newest is removed, one
    // is added in the middle of the order, and the directory is stamped as checked.
    fs::remove_file(dir.join("s1999.jsonl")).unwrap();
    fs::write(dir.join("new.jsonl"), "").unwrap();
    let past = UNIX_EPOCH + Duration::from_secs(1_600_000_000);
    set_dir_time(dir, past);
    let past_ns = modified_ns(&fs::metadata(dir).unwrap());
    append_records(
        &index,
        &[
            entry("s0500", 5000),
            Record::removal("s1999".into()),
            entry("new", 700),
            Record::stamp(past_ns),
        ],
    )
    .unwrap();

    let lazy = IndexCache::default();
    let (first, more) = page(&lazy, dir, None, None, 3, summary_of).unwrap();
    let first: Vec<String> = first.into_iter().map(|s| s.id).collect();
    assert_eq!(
        (first, more),
        (vec!["s0500".into(), "s1998".into(), "s1997".into()], true)
    );
    let read = lazy
        .folded()
        .as_ref()
        .map_or(0, |folded| folded.entries.len());
    assert!(read < 1000, "the first page read {read} entries");

    let full = list(&IndexCache::default(), dir, None, summary_of).unwrap();
    let full: Vec<String> = full.into_iter().map(|s| s.id).collect();
    assert_eq!(full.len(), 2000);
    assert_eq!(full.iter().position(|id| id == "new"), Some(1999 - 700));
    assert_eq!(
        walk(&lazy, dir, 7),
        full,
        "the walk goes on from what was read"
    );
    assert_eq!(walk(&IndexCache::default(), dir, 7), full);
}

#[test]
fn an_index_replaced_between_pages_is_read_anew() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path();
    let index = dir.join(INDEX_FILE);
    let records: Vec<Record> = (0..100)
        .rev()
        .map(|n| entry(&format!("s{n:03}"), n))
        .collect();
    for record in &records {
        fs::write(dir.join(format!("{}.jsonl", record.id)), "").unwrap();
    }
    rewrite(&index, records.iter()).unwrap();
    let past = UNIX_EPOCH + Duration::from_secs(1_600_000_000);
    set_dir_time(dir, past);
    let past_ns = modified_ns(&fs::metadata(dir).unwrap());
    append_records(&index, &[Record::stamp(past_ns)]).unwrap();
    let cache = IndexCache::default();
    let (first, _) = page(&cache, dir, None, None, 2, summary_of).unwrap();
    assert_eq!(first[0].id, "s099");
    // Another process rewrites the index with s050 made newest.
    let mut moved: Vec<Record> = records.clone();
    moved.retain(|record| record.id != "s050");
    moved.insert(0, entry("s050", 1000));
    rewrite(&index, moved.iter()).unwrap();
    set_dir_time(dir, past);
    append_records(&index, &[Record::stamp(past_ns)]).unwrap();
    let (again, _) = page(&cache, dir, None, None, 2, summary_of).unwrap();
    assert_eq!(again[0].id, "s050");
    assert_eq!(walk(&cache, dir, 9).len(), 100);
}

#[test]
fn started_over_is_kept_and_an_older_record_without_it_still_reads() {
    let mut header = Header::new("m1".into(), 1, "/w".into(), vec![]);
    header.started_over = Some("mcp".into());
    let line = serde_json::to_string(&Record::entry(&header, None)).unwrap();
    assert!(line.contains(r#""startedOver":"mcp""#), "{line}");
    let read: Record = serde_json::from_str(&line).unwrap();
    assert_eq!(read.into_summary().started_over.as_deref(), Some("mcp"));
    let old: Record = serde_json::from_str(r#"{"id":"e1","cwd":"/w","updatedNs":5}"#).unwrap();
    let summary = old.into_summary();
    assert_eq!((summary.id.as_str(), summary.started_over), ("e1", None));
}

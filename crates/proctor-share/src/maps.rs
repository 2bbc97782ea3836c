//! One process's mappings, grouped by what they are (the heap, the stack, anonymous memory,
//! each file), with what each holds privately dirty.
//!
//! In a forked worker every page starts shared with its master, so a mapping's private dirty
//! pages are the ones the worker copied (or allocated) since it was forked: its growth in that
//! mapping. A private file mapping (`r--p` over a model's weights) copied-on-write shows as
//! anonymous pages inside the file's mapping.

use std::collections::HashMap;

use proctor_procfs::smaps::{Counters, Mapping};
use serde::Serialize;

/// Mappings of one kind, or of one file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Area {
    /// `[heap]`, `[stack]`, `[anonymous]`, `[anon:NAME]`, a file's path, or another of the
    /// kernel's names (`[vdso]`).
    pub name: String,
    pub mappings: usize,
    pub size_bytes: u64,
    pub counters: Counters,
}

/// What grouping found: the areas with the most private dirty first, at most `limit` of them,
/// and the rest summed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Areas {
    pub areas: Vec<Area>,
    pub more_areas: usize,
    pub more_private_dirty_bytes: u64,
    pub mappings: usize,
    pub total: Counters,
}

fn area_name(m: &Mapping) -> String {
    let path = m.path.as_str();
    if path.is_empty() {
        "[anonymous]".into()
    } else if path.starts_with("[stack") {
        "[stack]".into()
    } else {
        path.to_string()
    }
}

pub fn areas(mappings: &[Mapping], limit: usize) -> Areas {
    let mut by_name: HashMap<String, Area> = HashMap::new();
    let mut total = Counters::default();
    for m in mappings {
        total.add(&m.counters);
        let name = area_name(m);
        let area = by_name.entry(name.clone()).or_insert_with(|| Area {
            name,
            mappings: 0,
            size_bytes: 0,
            counters: Counters::default(),
        });
        area.mappings += 1;
        area.size_bytes += m.size_bytes();
        area.counters.add(&m.counters);
    }
    let mut all: Vec<Area> = by_name.into_values().collect();
    all.sort_by(|a, b| {
        (b.counters.private_dirty_bytes, b.counters.rss_bytes, &a.name).cmp(&(
            a.counters.private_dirty_bytes,
            a.counters.rss_bytes,
            &b.name,
        ))
    });
    let rest = all.split_off(limit.min(all.len()));
    Areas {
        more_areas: rest.len(),
        more_private_dirty_bytes: rest.iter().map(|a| a.counters.private_dirty_bytes).sum(),
        areas: all,
        mappings: mappings.len(),
        total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(path: &str, size: u64, private_dirty: u64) -> Mapping {
        Mapping {
            start: 0,
            end: size,
            perms: "rw-p".into(),
            offset: 0,
            inode: 0,
            path: path.into(),
            counters: Counters { rss_bytes: size, private_dirty_bytes: private_dirty, ..Counters::default() },
            complete: true,
        }
    }

    #[test]
    fn grouped_by_area_biggest_copy_first() {
        let maps = vec![
            mapping("", 100, 10),
            mapping("[heap]", 1000, 900),
            mapping("", 300, 50),
            mapping("/srv/model.bin", 5000, 400),
            mapping("[stack]", 10, 8),
            mapping("/usr/lib/libc.so.6", 50, 1),
        ];
        let a = areas(&maps, 3);
        let names: Vec<_> = a.areas.iter().map(|x| (x.name.as_str(), x.counters.private_dirty_bytes)).collect();
        assert_eq!(names, vec![("[heap]", 900), ("/srv/model.bin", 400), ("[anonymous]", 60)]);
        assert_eq!(a.areas[2].mappings, 2);
        assert_eq!((a.more_areas, a.more_private_dirty_bytes), (2, 9));
        assert_eq!(a.total.private_dirty_bytes, 1369);
        assert_eq!(a.mappings, 6);
    }
}

//! A YAML document as a small tree whose every node knows its line and column, so a rules
//! file's mistakes can be pointed at. yaml-rust2's event parser does the YAML; this only keeps
//! the positions it reports. Nesting is bounded ([`MAX_DEPTH`]) while the events arrive, before
//! any tree is built: yaml-rust2's own `load` recurses once per level and a file of a few
//! thousand nested `- ` overflows a thread's stack, as would dropping or walking such a tree.

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// Lists and mappings nest at most this deep. A rules file needs four or five levels; the rest
/// of the 64 is room, not a use.
pub const MAX_DEPTH: usize = 64;

/// Where a node starts: 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

impl Pos {
    fn of(m: Marker) -> Pos {
        // yaml-rust2 counts lines from 1 and columns from 0.
        Pos { line: m.line(), col: m.col() + 1 }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Scalar(String, Pos),
    Seq(Vec<Node>, Pos),
    /// Keys in document order, each with its position.
    Map(Vec<(String, Pos, Node)>, Pos),
    /// An alias, a non-scalar key or another construct the rules never need.
    Other(&'static str, Pos),
}

impl Node {
    pub fn pos(&self) -> Pos {
        match self {
            Node::Scalar(_, p) | Node::Seq(_, p) | Node::Map(_, p) | Node::Other(_, p) => *p,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Node::Scalar(..) => "a string",
            Node::Seq(..) => "a list",
            Node::Map(..) => "a mapping",
            Node::Other(what, _) => what,
        }
    }
}

/// An open collection while its children are read.
enum Open {
    Seq(Vec<Node>, Pos),
    /// Entries so far, and a key waiting for its value.
    Map(Vec<(String, Pos, Node)>, Pos, Option<(String, Pos)>),
}

#[derive(Default)]
struct Builder {
    stack: Vec<Open>,
    root: Option<Node>,
}

impl Builder {
    fn push(&mut self, node: Node) {
        match self.stack.last_mut() {
            None => {
                if self.root.is_none() {
                    self.root = Some(node);
                }
            }
            Some(Open::Seq(items, _)) => items.push(node),
            Some(Open::Map(entries, _, key)) => match key.take() {
                None => match node {
                    Node::Scalar(k, p) => *key = Some((k, p)),
                    other => *key = Some((format!("<{}>", other.kind()), other.pos())),
                },
                Some((k, p)) => entries.push((k, p, node)),
            },
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let pos = Pos::of(mark);
        match ev {
            Event::Scalar(text, ..) => self.push(Node::Scalar(text, pos)),
            Event::SequenceStart(..) => self.stack.push(Open::Seq(Vec::new(), pos)),
            Event::MappingStart(..) => self.stack.push(Open::Map(Vec::new(), pos, None)),
            Event::SequenceEnd | Event::MappingEnd => {
                let node = match self.stack.pop() {
                    Some(Open::Seq(items, p)) => Node::Seq(items, p),
                    Some(Open::Map(entries, p, _)) => Node::Map(entries, p),
                    None => return,
                };
                self.push(node);
            }
            Event::Alias(_) => self.push(Node::Other("an alias (anchors are not supported)", pos)),
            _ => {}
        }
    }
}

/// The first document of `text`; `Ok(None)` for an empty file. A YAML error, or nesting past
/// [`MAX_DEPTH`], comes back with its position and a message that says which it was.
pub fn load(text: &str) -> Result<Option<Node>, (Pos, String)> {
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(text);
    // The events are pulled one at a time (yaml-rust2's `Parser::load` would recurse), and the
    // first document's end ends the reading, as `load(.., false)` does.
    loop {
        let (ev, mark) = parser.next_token().map_err(|e| (Pos::of(*e.marker()), format!("not YAML: {}", e.info())))?;
        match ev {
            Event::DocumentEnd | Event::StreamEnd => break,
            Event::SequenceStart(..) | Event::MappingStart(..) if builder.stack.len() >= MAX_DEPTH => {
                return Err((
                    Pos::of(mark),
                    format!("lists and mappings nested more than {MAX_DEPTH} deep: not a rules file proctor reads"),
                ));
            }
            _ => builder.on_event(ev, mark),
        }
    }
    Ok(builder.root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_lines_and_columns() {
        let text = "process_names:\n  - name: x\n    comm:\n      - bash\n";
        let root = load(text).expect("parses").expect("a document");
        let Node::Map(entries, _) = &root else { panic!("{root:?}") };
        assert_eq!((entries[0].0.as_str(), entries[0].1), ("process_names", Pos { line: 1, col: 1 }));
        let Node::Seq(items, _) = &entries[0].2 else { panic!() };
        let Node::Map(rule, _) = &items[0] else { panic!() };
        assert_eq!((rule[0].0.as_str(), rule[0].1), ("name", Pos { line: 2, col: 5 }));
        let Node::Seq(comms, _) = &rule[1].2 else { panic!() };
        assert_eq!(comms[0], Node::Scalar("bash".into(), Pos { line: 4, col: 9 }));
    }

    #[test]
    fn a_yaml_error_has_its_position() {
        let (pos, why) = load("process_names:\n  - name: [unclosed\n").expect_err("bad yaml");
        assert!(pos.line >= 2, "{pos:?} {why}");
        assert!(!why.is_empty());
        assert!(why.starts_with("not YAML: "), "{why}");
        assert_eq!(load("").expect("empty is fine"), None);
    }

    /// Issue 33: a file of thousands of nested `- ` overflowed the stack of whichever thread
    /// read it (yaml-rust2's loader recurses per level), and `serve` died on SIGHUP.
    #[test]
    fn deep_nesting_is_refused_with_its_line_not_a_stack_overflow() {
        for (open, depth) in [("- ", 100_000), ("- ", MAX_DEPTH + 1), ("[", MAX_DEPTH + 1), ("{a: ", MAX_DEPTH + 1)] {
            let text = open.repeat(depth) + "x\n";
            let (pos, why) = load(&text).expect_err("too deep");
            assert!(why.contains("nested more than 64 deep"), "{open:?} {depth}: {why}");
            assert_eq!(pos, Pos { line: 1, col: open.len() * MAX_DEPTH + 1 }, "{open:?} {depth}: {why}");
        }
        // yaml-rust2's scanner itself stops flow collections past 255 levels.
        assert!(load(&"[".repeat(100_000)).is_err());
        // 64 levels are fine, and the innermost is where it belongs.
        let ok = "- ".repeat(MAX_DEPTH) + "x\n";
        let mut node = load(&ok).expect("64 deep parses").expect("a document");
        for _ in 0..MAX_DEPTH {
            let Node::Seq(mut items, _) = node else { panic!("{node:?}") };
            node = items.remove(0);
        }
        assert_eq!(node, Node::Scalar("x".into(), Pos { line: 1, col: 2 * MAX_DEPTH + 1 }));
    }
}

//! What one rules file may cost, for process-exporter's group rules and the alert rules alike:
//! its size, its number of rules, how deep it nests ([`crate::yaml::MAX_DEPTH`]) and what its
//! regexes compile to. Each limit is far past a file a person writes; they are here so that a
//! broken or hostile file is refused, naming its line and the limit, instead of taking seconds
//! and hundreds of MiB. No I/O: the readers of files apply [`MAX_FILE_BYTES`].

use regex::{Regex, RegexBuilder};
use regex_automata::nfa::thompson::NFA;

/// A rules file larger than this is refused unread.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// Rules in one file (alert rules over all groups; `process_names` entries).
pub const MAX_RULES: usize = 2_000;

/// What one regex may compile to: its Thompson NFA, the program the regex crate runs.
pub const MAX_REGEX_BYTES: usize = 1 << 20;

/// What all the regexes of one file may compile to together.
pub const MAX_FILE_REGEX_BYTES: usize = 16 << 20;

/// The least a regex is charged: a compiled `Regex` holds about 16 KiB whatever its size, so
/// many small ones are bounded too (at most 4,096 a file).
pub const MIN_REGEX_CHARGE: usize = 4 << 10;

/// Compiles the regexes of one file against [`MAX_REGEX_BYTES`] each and
/// [`MAX_FILE_REGEX_BYTES`] in all.
#[derive(Debug)]
pub struct RegexBudget {
    left: usize,
}

impl Default for RegexBudget {
    fn default() -> Self {
        RegexBudget { left: MAX_FILE_REGEX_BYTES }
    }
}

impl RegexBudget {
    /// `pattern` compiled, or why not in one line. The regex crate reports no sizes, so the
    /// pattern's Thompson NFA (what its `size_limit` bounds) is built first and its size is
    /// charged; that build stops as soon as it passes what is left, so a refused regex costs
    /// no more than the limit.
    pub fn compile(&mut self, pattern: &str) -> Result<Regex, String> {
        let limit = self.left.min(MAX_REGEX_BYTES);
        let measured = NFA::compiler().configure(NFA::config().nfa_size_limit(Some(limit))).build(pattern);
        match measured {
            Ok(nfa) => self.left -= nfa.memory_usage().max(MIN_REGEX_CHARGE).min(self.left),
            Err(e) if e.size_limit().is_some() && limit < MAX_REGEX_BYTES => {
                return Err(format!(
                    "this file's regexes compile to more than {} MiB together (this one and those before it)",
                    MAX_FILE_REGEX_BYTES >> 20
                ))
            }
            Err(e) if e.size_limit().is_some() => {
                return Err(format!("compiles to more than {} MiB (the limit for one regex)", MAX_REGEX_BYTES >> 20))
            }
            // A syntax error: the regex crate's own words say it best.
            Err(_) => {}
        }
        // The regex crate counts more than the NFA measured above (a 527 KB NFA passes its
        // 1 MiB limit only past 2 MiB), so its own limit is a backstop, set where the measured
        // size is the one that decides.
        RegexBuilder::new(pattern).size_limit(4 * MAX_REGEX_BYTES).build().map_err(|e| one_line(&e.to_string()))
    }
}

/// A regex error on one line (the regex crate draws a multi-line caret picture).
pub fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.chars().all(|c| c == '^' || c == ' '))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_regex_past_its_limit_is_refused_before_it_is_built() {
        let mut budget = RegexBudget::default();
        let why = budget.compile(r"\w{100}\w{100}").expect_err("3.5 MB compiled");
        assert!(why.contains("more than 1 MiB (the limit for one regex)"), "{why}");
        assert_eq!(budget.left, MAX_FILE_REGEX_BYTES, "a refused regex costs nothing");
        assert!(budget.compile(r"-m\s+(?P<Mod>\S+)").expect("small").is_match("python -m  http"));
        assert!(budget.compile("(unclosed").expect_err("syntax").contains("unclosed group"));
    }

    #[test]
    fn a_file_s_regexes_together_are_bounded() {
        let mut budget = RegexBudget::default();
        // \w{40} is about 700 KB compiled: under the limit for one, 24 of them over all.
        let mut refused = None;
        for i in 0..40 {
            if let Err(why) = budget.compile(&format!(r"{i}\w{{40}}")) {
                refused = Some((i, why));
                break;
            }
        }
        let (i, why) = refused.expect("refused before 40");
        assert!((16..30).contains(&i), "{i}");
        assert!(why.contains("more than 16 MiB together"), "{why}");
        // Small ones are charged at least 4 KiB each: thousands, not millions.
        let mut small = RegexBudget::default();
        let taken = (0..5_000).take_while(|i| small.compile(&format!("^p{i}$")).is_ok()).count();
        assert_eq!(taken, MAX_FILE_REGEX_BYTES / MIN_REGEX_CHARGE);
    }
}

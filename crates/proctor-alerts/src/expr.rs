//! The alert expression language: a lexer, a precedence-climbing parser and the syntax tree.
//!
//! ```text
//! expr     := or ("for" DURATION)?
//! or       := and ("or" and)*
//! and      := not ("and" not)*
//! not      := "not" not | compare
//! compare  := sum (("=="|"!="|">"|"<"|">="|"<="|"=~"|"!~") sum)?
//! sum      := product (("+"|"-") product)*
//! product  := unary (("*"|"/") unary)*
//! unary    := "-" unary | primary
//! primary  := NUMBER UNIT? | STRING | "(" or ")" | call | series
//! call     := NAME "(" or ("," or)* ")"
//! series   := NAME ("{" matcher ("," matcher)* "}")? ("." NAME)*
//! matcher  := NAME ("="|"!="|"=~"|"!~") STRING
//! ```
//!
//! Pure: names are resolved against the catalogue by [`crate::compile`], not here.

use std::fmt;

/// A byte range in the expression's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

/// A mistake in an expression, at a byte offset of its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub at: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at character {}: {}", self.at + 1, self.message)
    }
}

/// What a literal's unit measures; `None` for a bare number. Literals are read by the one
/// quantity grammar (proctor-units): `2G`, `2GiB` and `2 GiB` are the same size everywhere a
/// person types one.
pub use proctor_units::Dim;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Gt,
    Lt,
    Ge,
    Le,
    Match,
    NotMatch,
}

impl CmpOp {
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Gt => ">",
            CmpOp::Lt => "<",
            CmpOp::Ge => ">=",
            CmpOp::Le => "<=",
            CmpOp::Match => "=~",
            CmpOp::NotMatch => "!~",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogicOp {
    And,
    Or,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchOp {
    Eq,
    Ne,
    Re,
    NotRe,
}

/// `label OP "value"` inside a selector's braces.
#[derive(Debug, Clone, PartialEq)]
pub struct Matcher {
    pub label: String,
    pub op: MatchOp,
    pub value: String,
    pub span: Span,
}

/// A series as written: `host.cpu.busy_percent`, `process{name="gunicorn"}.rss_bytes`,
/// `process{cmdline=~"worker"}` (no field: for `count`).
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesAst {
    pub scope: String,
    /// `Some` when braces were written.
    pub matchers: Option<Vec<Matcher>>,
    /// The dotted path after the scope (and braces), empty when none.
    pub path: String,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Ast {
    Number { value: f64, dim: Dim, text: String, span: Span },
    Str { value: String, span: Span },
    Series(SeriesAst),
    Call { name: String, args: Vec<Ast>, span: Span },
    Neg(Box<Ast>, Span),
    Not(Box<Ast>, Span),
    Arith { op: ArithOp, lhs: Box<Ast>, rhs: Box<Ast>, span: Span },
    Compare { op: CmpOp, lhs: Box<Ast>, rhs: Box<Ast>, span: Span },
    Logic { op: LogicOp, lhs: Box<Ast>, rhs: Box<Ast>, span: Span },
}

impl Ast {
    pub fn span(&self) -> Span {
        match self {
            Ast::Number { span, .. }
            | Ast::Str { span, .. }
            | Ast::Call { span, .. }
            | Ast::Neg(_, span)
            | Ast::Not(_, span)
            | Ast::Arith { span, .. }
            | Ast::Compare { span, .. }
            | Ast::Logic { span, .. } => *span,
            Ast::Series(s) => s.span,
        }
    }
}

/// A parsed expression with its optional trailing `for DURATION` (seconds).
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub ast: Ast,
    pub for_secs: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num { value: f64, dim: Dim, text: String },
    Str(String),
    Name(String),
    Sym(&'static str),
    End,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Num { text, .. } => format!("the number {text}"),
            Tok::Str(s) => format!("the string {s:?}"),
            Tok::Name(n) => format!("`{n}`"),
            Tok::Sym(s) => format!("`{s}`"),
            Tok::End => "the end of the expression".to_string(),
        }
    }
}

const SYMBOLS: &[&str] =
    &["==", "!=", ">=", "<=", "=~", "!~", ">", "<", "=", "+", "-", "*", "/", "(", ")", "{", "}", ",", "."];

fn lex(text: &str) -> Result<Vec<(Tok, Span)>, ParseError> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c.is_ascii_digit() || (c == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let (q, used) = proctor_units::scan_quantity(&text[start..])
                .map_err(|e| ParseError { at: start + e.at, message: e.to_string() })?;
            i = start + used;
            out.push((
                Tok::Num { value: q.value, dim: q.dim, text: text[start..i].to_string() },
                Span { start, end: i },
            ));
            continue;
        }
        if c == b'"' || c == b'\'' {
            let quote = c;
            i += 1;
            let mut value = String::new();
            loop {
                let Some(ch) = text[i..].chars().next() else {
                    return Err(ParseError { at: start, message: "a string that is never closed".to_string() });
                };
                i += ch.len_utf8();
                if ch as u32 == quote as u32 {
                    break;
                }
                if ch == '\\' {
                    let Some(next) = text[i..].chars().next() else {
                        return Err(ParseError { at: start, message: "a string that is never closed".to_string() });
                    };
                    i += next.len_utf8();
                    match next {
                        'n' => value.push('\n'),
                        't' => value.push('\t'),
                        // Kept for regexes: `\d`, `\.` mean what they mean to the regex.
                        '"' | '\'' | '\\' => value.push(next),
                        other => {
                            value.push('\\');
                            value.push(other);
                        }
                    }
                } else {
                    value.push(ch);
                }
            }
            out.push((Tok::Str(value), Span { start, end: i }));
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            out.push((Tok::Name(text[start..i].to_string()), Span { start, end: i }));
            continue;
        }
        if let Some(sym) = SYMBOLS.iter().find(|s| text[i..].starts_with(**s)) {
            i += sym.len();
            out.push((Tok::Sym(sym), Span { start, end: i }));
            continue;
        }
        let ch = text[i..].chars().next().unwrap_or('?');
        return Err(ParseError { at: i, message: format!("unexpected character {ch:?}") });
    }
    out.push((Tok::End, Span { start: text.len(), end: text.len() }));
    Ok(out)
}

struct Parser {
    toks: Vec<(Tok, Span)>,
    pos: usize,
    depth: usize,
}

/// Deeper nesting than this is refused, so a hostile file cannot exhaust the stack.
const MAX_DEPTH: usize = 64;

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].0
    }

    fn span(&self) -> Span {
        self.toks[self.pos].1
    }

    fn bump(&mut self) -> (Tok, Span) {
        let t = self.toks[self.pos].clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn is_sym(&self, s: &str) -> bool {
        matches!(self.peek(), Tok::Sym(x) if *x == s)
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Tok::Name(x) if x == w)
    }

    fn expected(&self, what: &str) -> ParseError {
        ParseError { at: self.span().start, message: format!("expected {what}, found {}", self.peek().describe()) }
    }

    fn expect_sym(&mut self, s: &str, what: &str) -> Result<Span, ParseError> {
        if self.is_sym(s) {
            Ok(self.bump().1)
        } else {
            Err(self.expected(what))
        }
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ParseError { at: self.span().start, message: format!("nested deeper than {MAX_DEPTH}") });
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Ast, ParseError> {
        self.enter()?;
        let mut lhs = self.and()?;
        while self.is_word("or") {
            self.bump();
            let rhs = self.and()?;
            let span = join(lhs.span(), rhs.span());
            lhs = Ast::Logic { op: LogicOp::Or, lhs: Box::new(lhs), rhs: Box::new(rhs), span };
        }
        self.depth -= 1;
        Ok(lhs)
    }

    fn and(&mut self) -> Result<Ast, ParseError> {
        let mut lhs = self.not()?;
        while self.is_word("and") {
            self.bump();
            let rhs = self.not()?;
            let span = join(lhs.span(), rhs.span());
            lhs = Ast::Logic { op: LogicOp::And, lhs: Box::new(lhs), rhs: Box::new(rhs), span };
        }
        Ok(lhs)
    }

    fn not(&mut self) -> Result<Ast, ParseError> {
        if self.is_word("not") {
            let start = self.bump().1;
            self.enter()?;
            let inner = self.not()?;
            self.depth -= 1;
            let span = join(start, inner.span());
            return Ok(Ast::Not(Box::new(inner), span));
        }
        self.compare()
    }

    fn compare(&mut self) -> Result<Ast, ParseError> {
        let lhs = self.sum()?;
        let op = match self.peek() {
            Tok::Sym("==") => CmpOp::Eq,
            Tok::Sym("!=") => CmpOp::Ne,
            Tok::Sym(">") => CmpOp::Gt,
            Tok::Sym("<") => CmpOp::Lt,
            Tok::Sym(">=") => CmpOp::Ge,
            Tok::Sym("<=") => CmpOp::Le,
            Tok::Sym("=~") => CmpOp::Match,
            Tok::Sym("!~") => CmpOp::NotMatch,
            Tok::Sym("=") => {
                return Err(ParseError {
                    at: self.span().start,
                    message: "`=` compares nothing: write `==`".to_string(),
                })
            }
            _ => return Ok(lhs),
        };
        self.bump();
        let rhs = self.sum()?;
        let span = join(lhs.span(), rhs.span());
        if matches!(self.peek(), Tok::Sym("==" | "!=" | ">" | "<" | ">=" | "<=" | "=~" | "!~")) {
            return Err(ParseError {
                at: self.span().start,
                message: "comparisons do not chain: join them with `and`".to_string(),
            });
        }
        Ok(Ast::Compare { op, lhs: Box::new(lhs), rhs: Box::new(rhs), span })
    }

    fn sum(&mut self) -> Result<Ast, ParseError> {
        let mut lhs = self.product()?;
        loop {
            let op = match self.peek() {
                Tok::Sym("+") => ArithOp::Add,
                Tok::Sym("-") => ArithOp::Sub,
                _ => return Ok(lhs),
            };
            self.bump();
            let rhs = self.product()?;
            let span = join(lhs.span(), rhs.span());
            lhs = Ast::Arith { op, lhs: Box::new(lhs), rhs: Box::new(rhs), span };
        }
    }

    fn product(&mut self) -> Result<Ast, ParseError> {
        let mut lhs = self.unary()?;
        loop {
            let op = match self.peek() {
                Tok::Sym("*") => ArithOp::Mul,
                Tok::Sym("/") => ArithOp::Div,
                _ => return Ok(lhs),
            };
            self.bump();
            let rhs = self.unary()?;
            let span = join(lhs.span(), rhs.span());
            lhs = Ast::Arith { op, lhs: Box::new(lhs), rhs: Box::new(rhs), span };
        }
    }

    fn unary(&mut self) -> Result<Ast, ParseError> {
        if self.is_sym("-") {
            let start = self.bump().1;
            self.enter()?;
            let inner = self.unary()?;
            self.depth -= 1;
            let span = join(start, inner.span());
            return Ok(Ast::Neg(Box::new(inner), span));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Ast, ParseError> {
        let (tok, span) = self.bump();
        match tok {
            Tok::Num { value, dim, text } => Ok(Ast::Number { value, dim, text, span }),
            Tok::Str(value) => Ok(Ast::Str { value, span }),
            Tok::Sym("(") => {
                let inner = self.or()?;
                self.expect_sym(")", "`)`")?;
                Ok(inner)
            }
            Tok::Name(name) if ["and", "or", "not", "for"].contains(&name.as_str()) => {
                Err(ParseError { at: span.start, message: format!("expected a value, found `{name}`") })
            }
            Tok::Name(name) => {
                if self.is_sym("(") {
                    self.bump();
                    let mut args = Vec::new();
                    if !self.is_sym(")") {
                        loop {
                            args.push(self.or()?);
                            if self.is_sym(",") {
                                self.bump();
                                continue;
                            }
                            break;
                        }
                    }
                    let end = self.expect_sym(")", "`,` or `)`")?;
                    return Ok(Ast::Call { name, args, span: join(span, end) });
                }
                self.series(name, span)
            }
            other => {
                self.pos -= usize::from(self.pos > 0 && other != Tok::End);
                Err(self.expected("a value (a number, a string, a series or a function)"))
            }
        }
    }

    fn series(&mut self, first: String, start: Span) -> Result<Ast, ParseError> {
        let mut end = start;
        let mut matchers = None;
        // Dotted names before braces belong to the scope (`statsd.timer{key="x"}.upper_90`);
        // without braces, the first name is the scope and the rest the path.
        let mut scope = first;
        let mut path = String::new();
        while self.is_sym(".") && matches!(self.toks.get(self.pos + 1), Some((Tok::Name(_), _))) {
            self.bump();
            let (tok, nspan) = self.bump();
            if let Tok::Name(part) = tok {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&part);
            }
            end = nspan;
        }
        if self.is_sym("{") && !path.is_empty() {
            scope = format!("{scope}.{path}");
            path.clear();
        }
        if self.is_sym("{") {
            self.bump();
            let mut list = Vec::new();
            while !self.is_sym("}") {
                let (tok, lspan) = self.bump();
                let Tok::Name(label) = tok else {
                    self.pos -= 1;
                    return Err(self.expected("a label name or `}`"));
                };
                let op = match self.peek() {
                    Tok::Sym("=") | Tok::Sym("==") => MatchOp::Eq,
                    Tok::Sym("!=") => MatchOp::Ne,
                    Tok::Sym("=~") => MatchOp::Re,
                    Tok::Sym("!~") => MatchOp::NotRe,
                    _ => return Err(self.expected("`=`, `!=`, `=~` or `!~`")),
                };
                self.bump();
                let (tok, vspan) = self.bump();
                let Tok::Str(value) = tok else {
                    self.pos -= 1;
                    return Err(self.expected("a quoted string"));
                };
                list.push(Matcher { label, op, value, span: join(lspan, vspan) });
                if self.is_sym(",") {
                    self.bump();
                } else if !self.is_sym("}") {
                    return Err(self.expected("`,` or `}`"));
                }
            }
            end = self.bump().1;
            matchers = Some(list);
        }
        while self.is_sym(".") {
            self.bump();
            let (tok, nspan) = self.bump();
            let Tok::Name(part) = tok else {
                self.pos -= 1;
                return Err(self.expected("a field name after `.`"));
            };
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(&part);
            end = nspan;
        }
        Ok(Ast::Series(SeriesAst { scope, matchers, path, span: join(start, end) }))
    }
}

fn join(a: Span, b: Span) -> Span {
    Span { start: a.start.min(b.start), end: a.end.max(b.end) }
}

/// Parses an expression with its optional trailing `for DURATION`.
pub fn parse(text: &str) -> Result<Parsed, ParseError> {
    let toks = lex(text)?;
    let mut p = Parser { toks, pos: 0, depth: 0 };
    if matches!(p.peek(), Tok::End) {
        return Err(ParseError { at: 0, message: "the expression is empty".to_string() });
    }
    let ast = p.or()?;
    let mut for_secs = None;
    if p.is_word("for") {
        p.bump();
        let (tok, span) = p.bump();
        match tok {
            Tok::Num { value, dim: Dim::Seconds, .. } => for_secs = Some(value),
            other => {
                return Err(ParseError {
                    at: span.start,
                    message: format!("expected a duration after `for` (30s, 5m), found {}", other.describe()),
                })
            }
        }
    }
    if !matches!(p.peek(), Tok::End) {
        return Err(p.expected("an operator (and, or, ==, >, +, …) or the end of the expression"));
    }
    Ok(Parsed { ast, for_secs })
}

/// A duration as rules files write them (`30s`, `5m`, `1h30m`, `1w`, `0`), in seconds: the one
/// duration grammar (proctor-units).
pub fn parse_duration(text: &str) -> Result<f64, String> {
    proctor_units::parse_duration(text).map(|d| d.as_secs_f64()).map_err(|e| match e {
        proctor_units::DurationError::UnknownUnit { text, unit } => {
            format!("{text:?}: unknown duration unit {unit:?} (ns, us, ms, s, m, h, d, w, y; parts as in 1h30m)")
        }
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(value: f64, dim: Dim) -> impl Fn(&Ast) -> bool {
        move |a| matches!(a, Ast::Number { value: v, dim: d, .. } if (*v - value).abs() < 1e-9 * value.abs().max(1.0) && *d == dim)
    }

    #[test]
    fn units_in_literals_are_scaled_to_their_base() {
        for (text, value, dim) in [
            ("90%", 90.0, Dim::Percent),
            ("250ms", 0.25, Dim::Seconds),
            ("5m", 300.0, Dim::Seconds),
            ("2GiB", 2.0 * 1024.0 * 1024.0 * 1024.0, Dim::Bytes),
            ("1.5kB", 1500.0, Dim::Bytes),
            ("10MiB/s", 10.0 * 1024.0 * 1024.0, Dim::BytesPerSec),
            ("100/s", 100.0, Dim::PerSec),
            ("1e3", 1000.0, Dim::None),
            ("1_000", 1000.0, Dim::None),
            ("2G", 2.0 * 1024.0 * 1024.0 * 1024.0, Dim::Bytes),
            ("2 GiB", 2.0 * 1024.0 * 1024.0 * 1024.0, Dim::Bytes),
            ("3000/min", 50.0, Dim::PerSec),
            ("1h30m", 5400.0, Dim::Seconds),
        ] {
            let parsed = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!(num(value, dim)(&parsed.ast), "{text}: {:?}", parsed.ast);
        }
        let err = parse("5 parsecs").expect_err("an error");
        assert_eq!(err.at, 2, "{err}");
        let err = parse("5parsecs").expect_err("an error");
        assert!(err.message.starts_with("unknown unit \"parsecs\""), "{err}");
    }

    #[test]
    fn precedence_and_selectors() {
        let p = parse(
            r#"process{name="gunicorn", cmdline=~"w\d+"}.rss_bytes > 2GiB and host.cpu.busy_percent > 90% for 30s"#,
        )
        .expect("parses");
        assert_eq!(p.for_secs, Some(30.0));
        let Ast::Logic { op: LogicOp::And, lhs, .. } = &p.ast else { panic!("{:?}", p.ast) };
        let Ast::Compare { op: CmpOp::Gt, lhs, .. } = lhs.as_ref() else { panic!("{lhs:?}") };
        let Ast::Series(s) = lhs.as_ref() else { panic!("{lhs:?}") };
        assert_eq!(s.scope, "process");
        assert_eq!(s.path, "rss_bytes");
        let m = s.matchers.as_ref().expect("matchers");
        assert_eq!(m[1].value, r"w\d+");
        assert_eq!(m[1].op, MatchOp::Re);

        let p = parse("1 + 2 * 3 - -4").expect("parses");
        let Ast::Arith { op: ArithOp::Sub, lhs, .. } = &p.ast else { panic!("{:?}", p.ast) };
        assert!(matches!(lhs.as_ref(), Ast::Arith { op: ArithOp::Add, .. }));
    }

    #[test]
    fn every_mistake_says_where_and_what_was_expected() {
        for (text, at, says) in [
            ("host.cpu.busy_percent >", 23, "expected a value"),
            ("host.cpu.busy_percent = 5", 22, "write `==`"),
            ("1 < 2 < 3", 6, "do not chain"),
            ("process{name=gunicorn}", 13, "expected a quoted string"),
            ("(1 > 2", 6, "expected `)`"),
            ("max_over(host.load.avg1, 5m", 27, "expected `,` or `)`"),
            ("1 > 2 3", 6, "expected an operator"),
            ("x > 1 for 5", 10, "expected a duration after `for`"),
            ("\"open", 0, "never closed"),
            ("a $ b", 2, "unexpected character '$'"),
            ("", 0, "empty"),
        ] {
            let err = parse(text).expect_err(text);
            assert_eq!(err.at, at, "{text}: {err}");
            assert!(err.message.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn hostile_nesting_is_refused_not_a_stack_overflow() {
        let text = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(parse(&text).expect_err("an error").message.contains("nested deeper"));
        let text = format!("{}1", "-".repeat(10_000));
        assert!(parse(&text).expect_err("an error").message.contains("nested deeper"));
        let text = format!("{}1", "not ".repeat(10_000));
        assert!(parse(&text).expect_err("an error").message.contains("nested deeper"));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1h30m"), Ok(5400.0));
        assert_eq!(parse_duration("250ms"), Ok(0.25));
        assert_eq!(parse_duration("0"), Ok(0.0));
        // The one duration grammar: what a flag takes, a rules file takes.
        assert_eq!(parse_duration("5 minutes"), Ok(300.0));
        assert_eq!(parse_duration("1w"), Ok(604_800.0));
        assert!(parse_duration("5 fortnights").is_err_and(|e| e.contains("unknown duration unit")));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("").is_err());
    }
}

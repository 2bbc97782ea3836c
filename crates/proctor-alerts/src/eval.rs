//! Expressions compiled against the catalogue (names resolved, units and shapes checked) and
//! evaluated over one snapshot at a time, with the windows `rate`/`avg_over`/`max_over`/
//! `min_over` need kept here, bounded.
//!
//! Selectors are matched once per process, not once per rule: every process selector of the
//! rule set gets a bit, and a row's bits are kept from the previous evaluation while its pid,
//! start time, name, command line, user and cgroup are unchanged.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use proctor_agent::Snapshot;
use proctor_groups::GroupRow;
use proctor_model::ProcessRow;
use proctor_vocab::fields::{self, GroupRead, Reading, RowCtx, RowRead};
use proctor_vocab::units::Unit;
use regex::Regex;

use crate::catalog::{self, Scope};
use crate::expr::{ArithOp, Ast, CmpOp, Dim, LogicOp, MatchOp, Span};

/// A value: a number in the series' base unit, a text, a truth, or nothing known.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Num(f64),
    Text(Arc<str>),
    Bool(bool),
    Missing,
}

impl Val {
    fn num(self) -> Option<f64> {
        match self {
            Val::Num(v) if v.is_finite() => Some(v),
            _ => None,
        }
    }

    fn truth(&self) -> bool {
        matches!(self, Val::Bool(true))
    }

    fn as_num(&self) -> Option<f64> {
        match self {
            Val::Num(v) if v.is_finite() => Some(*v),
            _ => None,
        }
    }
}

/// Which instance a per-instance value belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// The one instance of a rule over host, container or agent series.
    One,
    Process {
        pid: u32,
        start_ticks: u64,
    },
    Group(Arc<str>),
}

/// A mistake found while compiling, at a byte range of the expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    pub span: Span,
    pub message: String,
}

/// A host field that is a catalog series outside the host shape, read from the model's host
/// series by index (`fields::host_series_index`), not off the shape.
fn host_series_name(scope: Scope, name: &str) -> bool {
    scope == Scope::Host && fields::host_series_index(name).is_some()
}

fn err<T>(span: Span, message: impl Into<String>) -> Result<T, CompileError> {
    Err(CompileError { span, message: message.into() })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
    Num(Dim),
    Text,
    Bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    One,
    Each(Scope),
}

fn dim_of(unit: Unit) -> Ty {
    match unit {
        Unit::Percent => Ty::Num(Dim::Percent),
        Unit::Bytes => Ty::Num(Dim::Bytes),
        Unit::BytesPerSec => Ty::Num(Dim::BytesPerSec),
        Unit::PerSec => Ty::Num(Dim::PerSec),
        Unit::Seconds | Unit::UnixSeconds => Ty::Num(Dim::Seconds),
        Unit::Text | Unit::TextList => Ty::Text,
        Unit::Count | Unit::Number | Unit::Cpus | Unit::Watts | Unit::UnixMillis => Ty::Num(Dim::None),
    }
}

/// A field's reading as a value: text is shared from here on (a rule's labels, windows).
fn val(r: Reading<'_>) -> Val {
    match r {
        Reading::Num(v) => Val::Num(v),
        Reading::Text(t) => Val::Text(Arc::from(t.as_ref())),
        Reading::Missing => Val::Missing,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggOp {
    Count,
    Sum,
    Avg,
    Min,
    Max,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverOp {
    Rate,
    Avg,
    Min,
    Max,
}

enum Node {
    Const(Val),
    Scalar(usize),
    /// A statsd value; timers' milliseconds become seconds.
    Statsd {
        slot: usize,
        millis: bool,
    },
    /// A process field, read through the field table.
    Proc {
        sel: usize,
        read: RowRead,
    },
    Group {
        sel: usize,
        read: GroupRead,
    },
    /// Every member of a selector, as `true`: what `count(process{…})` counts.
    Members {
        scope: Scope,
        sel: usize,
    },
    Agg {
        op: AggOp,
        arg: Box<Node>,
    },
    Over {
        op: OverOp,
        arg: Box<Node>,
        window: f64,
        slot: usize,
    },
    Neg(Box<Node>),
    Not(Box<Node>),
    Arith {
        op: ArithOp,
        lhs: Box<Node>,
        rhs: Box<Node>,
    },
    Compare {
        op: CmpOp,
        lhs: Box<Node>,
        rhs: Box<Node>,
        regex: Option<Regex>,
        capture: bool,
        /// Only the instances where it holds are kept (false ones are dropped): safe everywhere
        /// but under `not`, which needs the false ones to turn true.
        sparse: bool,
    },
    Logic {
        op: LogicOp,
        lhs: Box<Node>,
        rhs: Box<Node>,
    },
}

/// A compiled matcher of a selector.
#[derive(Debug)]
struct LabelMatch {
    label: &'static str,
    op: MatchOp,
    value: String,
    regex: Option<Regex>,
}

impl LabelMatch {
    fn test(&self, text: &str) -> bool {
        match (self.op, &self.regex) {
            (MatchOp::Eq, _) => text == self.value,
            (MatchOp::Ne, _) => text != self.value,
            (MatchOp::Re, Some(re)) => re.is_match(text),
            (MatchOp::NotRe, Some(re)) => !re.is_match(text),
            _ => false,
        }
    }
}

#[derive(Debug)]
struct Selector {
    scope: Scope,
    text: String,
    matchers: Vec<LabelMatch>,
}

/// Where the shared parts of a rule set's expressions live: selectors, scalar slots, windows.
#[derive(Default)]
pub struct Plan {
    selectors: Vec<Selector>,
    /// (scope, vocabulary field name) per scalar slot.
    scalars: Vec<(Scope, &'static str)>,
    windows: usize,
    /// Programs using each window slot.
    window_uses: Vec<u32>,
    /// The windows over one scalar, by (function, window's bits, scalar slot): rules that fold
    /// the same series over the same window share one (eight rules over a 10-minute window
    /// each kept and folded 600 points, every evaluation).
    scalar_windows: Vec<(OverOp, u64, usize, usize)>,
    /// statsd values per slot: (type, key, statistic).
    statsd: Vec<StatsdRef>,
    /// The unit of the capturing comparison's left side, while a program compiles.
    capture_unit: Option<Unit>,
    /// What the file's `=~` regexes may still compile to.
    regexes: proctor_groups::limits::RegexBudget,
}

/// A statsd value a rule names: `statsd.timer{key="api.latency"}.upper_90`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsdRef {
    /// `timer`, `counter`, `gauge` or `set`.
    pub kind: &'static str,
    pub key: String,
    /// Etsy's name of the statistic (`upper_90`, `count`, `rate`, `value`).
    pub stat: String,
}

/// Where statsd values come from: the last flush of `serve --statsd`'s server. Timer
/// statistics in milliseconds, as statsd gives them; counts and rates as they are.
pub type StatsdSource = std::sync::Arc<dyn Fn(&StatsdRef) -> Option<f64> + Send + Sync>;

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("selectors", &self.selectors.len())
            .field("scalars", &self.scalars)
            .field("windows", &self.windows)
            .finish()
    }
}

/// One compiled expression.
pub struct Program {
    root: Node,
    shape: Shape,
    /// The unit of the value `$value` shows (the left side of the first comparison).
    pub value_unit: Option<Unit>,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program").field("per_instance", &self.per_instance()).finish_non_exhaustive()
    }
}

impl Program {
    /// Whether the expression fires per process or per group.
    pub fn per_instance(&self) -> Option<Scope> {
        match self.shape {
            Shape::One => None,
            Shape::Each(scope) => Some(scope),
        }
    }
}

struct Compiled {
    node: Node,
    ty: Ty,
    shape: Shape,
    unit: Option<Unit>,
}

impl Plan {
    /// Compiles `ast` (a whole rule expression: it must be a truth).
    pub fn compile(&mut self, ast: &Ast) -> Result<Program, CompileError> {
        let mut capture_done = false;
        self.capture_unit = None;
        let c = self.node(ast, &mut capture_done)?;
        if c.ty != Ty::Bool {
            return err(
                ast.span(),
                "a rule's expression must be a condition (a comparison such as `> 90%`), not a value",
            );
        }
        let value_unit = self.capture_unit.take();
        Ok(Program { root: c.node, shape: c.shape, value_unit })
    }

    /// `re` anchored at both ends (as Prometheus anchors them), charged to the file's budget.
    fn anchored(&mut self, re: &str) -> Result<Regex, String> {
        self.regexes.compile(&format!("^(?:{re})$")).map_err(|why| format!("bad regex {re:?}: {why}"))
    }

    fn selector(&mut self, scope: Scope, text: String, matchers: Vec<LabelMatch>) -> usize {
        if let Some(i) = self.selectors.iter().position(|s| s.scope == scope && s.text == text) {
            return i;
        }
        self.selectors.push(Selector { scope, text, matchers });
        self.selectors.len() - 1
    }

    fn node(&mut self, ast: &Ast, capture_done: &mut bool) -> Result<Compiled, CompileError> {
        Ok(match ast {
            Ast::Number { value, dim, .. } => {
                Compiled { node: Node::Const(Val::Num(*value)), ty: Ty::Num(*dim), shape: Shape::One, unit: None }
            }
            Ast::Str { value, .. } => Compiled {
                node: Node::Const(Val::Text(Arc::from(value.as_str()))),
                ty: Ty::Text,
                shape: Shape::One,
                unit: None,
            },
            Ast::Series(s) => self.series(s, false)?,
            Ast::Call { name, args, span } => self.call(name, args, *span, capture_done)?,
            Ast::Neg(inner, span) => {
                let c = self.node(inner, capture_done)?;
                if !matches!(c.ty, Ty::Num(_)) {
                    return err(*span, "`-` needs a number");
                }
                Compiled { node: Node::Neg(Box::new(c.node)), ..c }
            }
            Ast::Not(inner, span) => {
                let c = self.node(inner, capture_done)?;
                if c.ty != Ty::Bool {
                    return err(*span, "`not` needs a condition");
                }
                let mut inner = c.node;
                densify(&mut inner);
                Compiled { node: Node::Not(Box::new(inner)), ..c }
            }
            Ast::Arith { op, lhs, rhs, span } => {
                let l = self.node(lhs, capture_done)?;
                let r = self.node(rhs, capture_done)?;
                let (Ty::Num(ld), Ty::Num(rd)) = (l.ty, r.ty) else {
                    return err(*span, "arithmetic needs numbers on both sides");
                };
                let shape = join_shape(l.shape, r.shape, *span)?;
                let dim = match op {
                    ArithOp::Add | ArithOp::Sub => match (ld, rd) {
                        (a, b) if a == b => a,
                        (Dim::None, b) => b,
                        (a, Dim::None) => a,
                        (a, b) => return err(*span, format!("cannot add or subtract {} and {}", a.name(), b.name())),
                    },
                    ArithOp::Mul => match (ld, rd) {
                        (Dim::None, b) => b,
                        (a, Dim::None) => a,
                        _ => Dim::None,
                    },
                    ArithOp::Div => match (ld, rd) {
                        (a, Dim::None) => a,
                        _ => Dim::None,
                    },
                };
                let unit = if dim == Dim::None { None } else { l.unit.or(r.unit) };
                Compiled {
                    node: Node::Arith { op: *op, lhs: Box::new(l.node), rhs: Box::new(r.node) },
                    ty: Ty::Num(dim),
                    shape,
                    unit,
                }
            }
            Ast::Compare { op, lhs, rhs, span } => {
                let capture = !*capture_done;
                *capture_done = true;
                let l = self.node(lhs, capture_done)?;
                if capture {
                    self.capture_unit = l.unit;
                }
                let r = self.node(rhs, capture_done)?;
                let shape = join_shape(l.shape, r.shape, *span)?;
                let mut regex = None;
                match (l.ty, r.ty) {
                    (Ty::Num(a), Ty::Num(b)) => {
                        if matches!(op, CmpOp::Match | CmpOp::NotMatch) {
                            return err(*span, format!("`{}` matches text against a regex, not numbers", op.as_str()));
                        }
                        if a != b && a != Dim::None && b != Dim::None {
                            return err(
                                *span,
                                format!("compares {} with {}: {}", a.name(), b.name(), literal_hint(lhs, rhs, a, b)),
                            );
                        }
                        if (a == Dim::None) != (b == Dim::None)
                            && (a == Dim::Percent || b == Dim::Percent)
                            && is_ratio(lhs, rhs)
                        {
                            return err(*span, "compares a plain ratio with a percentage: write 0.9 for 90 %, or multiply the ratio by 100");
                        }
                    }
                    (Ty::Text, Ty::Text) => match op {
                        CmpOp::Eq | CmpOp::Ne => {}
                        CmpOp::Match | CmpOp::NotMatch => {
                            let Ast::Str { value, .. } = rhs.as_ref() else {
                                return err(rhs.span(), "the right side of `=~` must be a quoted regex");
                            };
                            regex =
                                Some(self.anchored(value).map_err(|e| CompileError { span: rhs.span(), message: e })?);
                        }
                        _ => {
                            return err(
                                *span,
                                format!("`{}` compares numbers; text compares with ==, !=, =~ or !~", op.as_str()),
                            )
                        }
                    },
                    (Ty::Text, Ty::Num(_)) | (Ty::Num(_), Ty::Text) => {
                        return err(*span, "compares text with a number");
                    }
                    _ => return err(*span, "compares a condition: combine conditions with `and`/`or`"),
                }
                Compiled {
                    node: Node::Compare {
                        op: *op,
                        lhs: Box::new(l.node),
                        rhs: Box::new(r.node),
                        regex,
                        capture,
                        sparse: true,
                    },
                    ty: Ty::Bool,
                    shape,
                    unit: None,
                }
            }
            Ast::Logic { op, lhs, rhs, span } => {
                let l = self.node(lhs, capture_done)?;
                let r = self.node(rhs, capture_done)?;
                if l.ty != Ty::Bool || r.ty != Ty::Bool {
                    let word = if *op == LogicOp::And { "and" } else { "or" };
                    return err(*span, format!("`{word}` joins conditions (comparisons), not values"));
                }
                let shape = join_shape(l.shape, r.shape, *span)?;
                Compiled {
                    node: Node::Logic { op: *op, lhs: Box::new(l.node), rhs: Box::new(r.node) },
                    ty: Ty::Bool,
                    shape,
                    unit: None,
                }
            }
        })
    }

    /// The statsd values the plan reads.
    pub fn statsd_refs(&self) -> &[StatsdRef] {
        &self.statsd
    }

    fn statsd_series(&mut self, s: &crate::expr::SeriesAst) -> Result<Compiled, CompileError> {
        let kind = match s.scope.as_str() {
            "statsd.timer" => "timer",
            "statsd.counter" => "counter",
            "statsd.gauge" => "gauge",
            "statsd.set" => "set",
            _ => {
                return err(
                    s.span,
                    "statsd series are statsd.timer{key=\"…\"}.STAT, statsd.counter{key=\"…\"}.count|rate, statsd.gauge{key=\"…\"} or statsd.set{key=\"…\"}.count",
                )
            }
        };
        let key = match s.matchers.as_deref() {
            Some([m]) if m.label == "key" && m.op == MatchOp::Eq => m.value.clone(),
            _ => return err(s.span, format!("statsd.{kind} takes one exact key: statsd.{kind}{{key=\"name\"}}")),
        };
        let stat = match (kind, s.path.as_str()) {
            ("gauge", "" | "value") => "value".to_string(),
            ("counter", "count") => "count".to_string(),
            ("counter", "rate" | "rate_per_second") => "rate".to_string(),
            ("set", "" | "count") => "count".to_string(),
            ("timer", stat) if !stat.is_empty() && !stat.contains('.') => stat.to_string(),
            (kind, path) => {
                let known = match kind {
                    "timer" => "a timer statistic (upper, lower, mean, median, std, sum, count, count_ps, upper_90, …)",
                    "counter" => "count or rate",
                    _ => "nothing or count",
                };
                return err(s.span, format!("statsd.{kind} takes {known}, not `{path}`"));
            }
        };
        // Timer statistics are milliseconds (Etsy's), but for the counts among them.
        let counted = stat.starts_with("count") || stat == "sum_squares" || stat.starts_with("bin_");
        let (ty, unit) = match kind {
            "timer" if !counted => (Ty::Num(Dim::Seconds), Some(Unit::Seconds)),
            "counter" if stat == "rate" => (Ty::Num(Dim::PerSec), Some(Unit::PerSec)),
            _ => (Ty::Num(Dim::None), None),
        };
        let r = StatsdRef { kind, key, stat };
        let slot = match self.statsd.iter().position(|x| *x == r) {
            Some(i) => i,
            None => {
                self.statsd.push(r);
                self.statsd.len() - 1
            }
        };
        Ok(Compiled { node: Node::Statsd { slot, millis: kind == "timer" && !counted }, ty, shape: Shape::One, unit })
    }

    fn series(&mut self, s: &crate::expr::SeriesAst, members_ok: bool) -> Result<Compiled, CompileError> {
        if s.scope.starts_with("statsd.") {
            return self.statsd_series(s);
        }
        let full = if s.path.is_empty() { s.scope.clone() } else { format!("{}.{}", s.scope, s.path) };
        let Some(scope) = Scope::parse(&s.scope) else {
            let why = match s.scope.split('.').next().unwrap_or("") {
                "statsd" => "statsd series are statsd.timer{key=\"…\"}.STAT, statsd.counter{key=\"…\"}.count|rate, statsd.gauge{key=\"…\"} or statsd.set{key=\"…\"}.count".to_string(),
                "probe" => "probe series are not available to rules yet: `proctor serve` runs no prober (see docs/alerts.md)".to_string(),
                _ => format!(
                    "unknown series `{full}`: series start with host., container., agent., process or group; closest known: {}",
                    catalog::closest(&full).join(", ")
                ),
            };
            return err(s.span, why);
        };
        if s.matchers.is_some() && !scope.per_instance() {
            return err(
                s.span,
                format!("`{}` has one value: only process and group take {{…}} selectors", scope.name()),
            );
        }
        if !scope.per_instance() {
            let Some((name, unit)) = catalog::resolve(scope, &s.path) else {
                return err(
                    s.span,
                    format!("unknown series `{full}`; closest known: {}", catalog::closest(&full).join(", ")),
                );
            };
            if unit == Unit::Text || unit == Unit::TextList {
                return err(s.span, format!("`{full}` is text; rules compare numbers of host, container and agent"));
            }
            let slot = match self.scalars.iter().position(|&(sc, n)| sc == scope && n == name) {
                Some(i) => i,
                None => {
                    self.scalars.push((scope, name));
                    self.scalars.len() - 1
                }
            };
            return Ok(Compiled { node: Node::Scalar(slot), ty: dim_of(unit), shape: Shape::One, unit: Some(unit) });
        }
        let labels = if scope == Scope::Process { catalog::PROCESS_LABELS } else { catalog::GROUP_LABELS };
        let mut matchers = Vec::new();
        for m in s.matchers.iter().flatten() {
            let Some(label) = labels.iter().find(|l| **l == m.label) else {
                return err(
                    m.span,
                    format!("`{}` selects by {}; not by `{}`", scope.name(), labels.join(", "), m.label),
                );
            };
            let regex = match m.op {
                MatchOp::Re | MatchOp::NotRe => {
                    Some(self.anchored(&m.value).map_err(|e| CompileError { span: m.span, message: e })?)
                }
                _ => None,
            };
            matchers.push(LabelMatch { label, op: m.op, value: m.value.clone(), regex });
        }
        let text = s
            .matchers
            .iter()
            .flatten()
            .map(|m| format!("{}{:?}{:?}", m.label, m.op, m.value))
            .collect::<Vec<_>>()
            .join(",");
        let sel = self.selector(scope, text, matchers);
        if s.path.is_empty() {
            if !members_ok {
                return err(
                    s.span,
                    format!(
                        "`{full}` names {}es, not a value: add a field (`.rss_bytes`) or count them with count(…)",
                        scope.name()
                    ),
                );
            }
            return Ok(Compiled {
                node: Node::Members { scope, sel },
                ty: Ty::Bool,
                shape: Shape::Each(scope),
                unit: None,
            });
        }
        let Some((name, unit)) = catalog::resolve(scope, &s.path) else {
            return err(
                s.span,
                format!(
                    "unknown series `{}.{}`; closest known: {}",
                    scope.name(),
                    s.path,
                    catalog::closest(&format!("{}.{}", scope.name(), s.path)).join(", ")
                ),
            );
        };
        let node = if scope == Scope::Process {
            let Some(f) = fields::process_reader(name) else {
                return err(s.span, format!("`process.{name}` cannot be compared"));
            };
            Node::Proc { sel, read: f.row }
        } else {
            let Some(f) = fields::group_reader(name) else {
                return err(s.span, format!("`group.{name}` cannot be compared"));
            };
            Node::Group { sel, read: f.read }
        };
        Ok(Compiled { node, ty: dim_of(unit), shape: Shape::Each(scope), unit: Some(unit) })
    }

    fn call(
        &mut self,
        name: &str,
        args: &[Ast],
        span: Span,
        capture_done: &mut bool,
    ) -> Result<Compiled, CompileError> {
        let agg = match name {
            "count" => Some(AggOp::Count),
            "sum" => Some(AggOp::Sum),
            "avg" => Some(AggOp::Avg),
            "min" => Some(AggOp::Min),
            "max" => Some(AggOp::Max),
            _ => None,
        };
        if let Some(op) = agg {
            let [arg] = args else { return err(span, format!("{name}(…) takes one argument")) };
            let c = match arg {
                Ast::Series(s) if op == AggOp::Count => self.series(s, true)?,
                other => self.node(other, capture_done)?,
            };
            if c.shape == Shape::One {
                return err(arg.span(), format!("{name}(…) folds processes or groups; `{}` has one value", "this"));
            }
            let ty = match (op, c.ty) {
                (AggOp::Count, _) => Ty::Num(Dim::None),
                (_, Ty::Num(d)) => Ty::Num(d),
                _ => return err(arg.span(), format!("{name}(…) needs numbers")),
            };
            let unit = if op == AggOp::Count { None } else { c.unit };
            return Ok(Compiled { node: Node::Agg { op, arg: Box::new(c.node) }, ty, shape: Shape::One, unit });
        }
        let over = match name {
            "rate" => OverOp::Rate,
            "avg_over" => OverOp::Avg,
            "min_over" => OverOp::Min,
            "max_over" => OverOp::Max,
            _ => {
                return err(
                    span,
                    format!("unknown function `{name}`: known are count, sum, avg, min, max, rate, avg_over, min_over, max_over"),
                )
            }
        };
        let (arg, window) = match (over, args) {
            (OverOp::Rate, [arg]) => (arg, 0.0),
            (_, [arg, Ast::Number { value, dim: Dim::Seconds, .. }]) => (arg, *value),
            (_, [_, other]) => {
                return err(other.span(), format!("{name}'s second argument is a window: a duration such as 5m"))
            }
            _ => {
                return err(
                    span,
                    format!("{name}(series, window) takes a series and a duration (rate's window is optional)"),
                )
            }
        };
        if !(0.0..=7.0 * 86400.0).contains(&window) {
            return err(span, "a window is between 0 and 7 days");
        }
        let c = self.node(arg, capture_done)?;
        let Ty::Num(dim) = c.ty else { return err(arg.span(), format!("{name}(…) needs a numeric series")) };
        let dim = if over == OverOp::Rate {
            match dim {
                Dim::Bytes => Dim::BytesPerSec,
                Dim::None => Dim::PerSec,
                Dim::Seconds => Dim::None,
                other => return err(arg.span(), format!("rate(…) of {} makes no sense", other.name())),
            }
        } else {
            dim
        };
        let share = match c.node {
            Node::Scalar(scalar) => Some((over, window.to_bits(), scalar)),
            _ => None,
        };
        let known = share.and_then(|k| self.scalar_windows.iter().find(|(o, w, s, _)| (*o, *w, *s) == k));
        let slot = match known {
            Some(&(.., slot)) => slot,
            None => {
                let slot = self.windows;
                self.windows += 1;
                self.window_uses.push(0);
                if let Some((o, w, s)) = share {
                    self.scalar_windows.push((o, w, s, slot));
                }
                slot
            }
        };
        if let Some(uses) = self.window_uses.get_mut(slot) {
            *uses += 1;
        }
        let unit = if over == OverOp::Rate { None } else { c.unit };
        Ok(Compiled {
            node: Node::Over { op: over, arg: Box::new(c.node), window, slot },
            ty: Ty::Num(dim),
            shape: c.shape,
            unit,
        })
    }
}

/// Keeps every instance of the comparisons under `node` (for `not`).
fn densify(node: &mut Node) {
    match node {
        Node::Compare { sparse, lhs, rhs, .. } => {
            *sparse = false;
            densify(lhs);
            densify(rhs);
        }
        Node::Logic { lhs, rhs, .. } | Node::Arith { lhs, rhs, .. } => {
            densify(lhs);
            densify(rhs);
        }
        Node::Not(inner) | Node::Neg(inner) => densify(inner),
        // Aggregates and windows fold their argument to one value or keep its instances: what
        // they give is not dropped by a sparse comparison inside them.
        _ => {}
    }
}

fn is_ratio(lhs: &Ast, rhs: &Ast) -> bool {
    matches!(lhs, Ast::Arith { op: ArithOp::Div, .. }) || matches!(rhs, Ast::Arith { op: ArithOp::Div, .. })
}

fn literal_hint(lhs: &Ast, rhs: &Ast, a: Dim, b: Dim) -> String {
    let (series, literal) = if matches!(rhs, Ast::Number { .. }) { (a, b) } else { (b, a) };
    let want = match series {
        Dim::Percent => "%",
        Dim::Seconds => "ms, s, m or h",
        Dim::Bytes => "B, KiB, MiB or GiB",
        Dim::BytesPerSec => "MiB/s or another size per second",
        Dim::PerSec => "/s",
        Dim::None => "no unit",
    };
    let _ = (lhs, literal);
    format!("write the literal in {want}")
}

fn join_shape(a: Shape, b: Shape, span: Span) -> Result<Shape, CompileError> {
    match (a, b) {
        (Shape::One, s) | (s, Shape::One) => Ok(s),
        (Shape::Each(x), Shape::Each(y)) if x == y => Ok(a),
        _ => err(span, "cannot combine per-process and per-group values in one comparison"),
    }
}

/// What evaluating one program gave.
enum Out {
    One(Val),
    /// Sorted by key.
    Each(Vec<(Key, Val)>),
}

/// The result of a rule's expression over one snapshot: the instances where it holds, each with
/// the value `$value` shows, and the instances that were evaluated at all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    pub holds: Vec<(Key, Option<f64>)>,
}

/// A window's points per instance; bounded by `MAX_WINDOW_POINTS` over all its instances.
#[derive(Default)]
struct Window {
    points: HashMap<Key, VecDeque<(f64, f64)>>,
    total: usize,
    refused: u64,
    /// More than one program folds it: it takes its point once per frame, and the others have
    /// the value it gave (`memo`, with the frame's number).
    shared: bool,
    memo: Option<(u64, Val)>,
}

const MAX_WINDOW_POINTS: usize = 200_000;

/// Per-row selector bits kept between evaluations.
#[derive(Default)]
struct RowCache {
    rows: Vec<CachedRow>,
    words: usize,
    bits: Vec<u64>,
}

struct CachedRow {
    pid: u32,
    start: u64,
    uid: Option<u32>,
    comm: Arc<str>,
    cmdline: Option<Arc<[String]>>,
    cgroup: Option<Arc<str>>,
}

impl CachedRow {
    fn same(&self, r: &ProcessRow) -> bool {
        self.pid == r.pid
            && self.start == r.start_ticks
            && self.uid == r.uid
            && (Arc::ptr_eq(&self.comm, &r.comm) || self.comm == r.comm)
            && match (&self.cmdline, &r.cmdline) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
                _ => false,
            }
            && match (&self.cgroup, &r.cgroup) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
                _ => false,
            }
    }
}

/// Counters of what evaluation cost and skipped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvalStats {
    pub evaluations: u64,
    pub selector_rows_matched: u64,
    pub selector_rows_reused: u64,
    pub window_points_refused: u64,
}

/// Evaluates a plan's programs over snapshots.
pub struct Evaluator {
    plan: Plan,
    users: BTreeMap<u32, String>,
    windows: Vec<Window>,
    cache: RowCache,
    /// The row cache before last, emptied: the next evaluation's is built in its buffers. A new
    /// one each time was two allocations of tens of KiB per evaluation, each large enough
    /// that glibc first consolidated every small chunk freed since (a fifth of an agent's
    /// evaluation, in cache misses).
    spare: RowCache,
    /// Per selector, the indices of the rows it selects in the current frame.
    members: Vec<Vec<u32>>,
    scalars: Vec<Option<f64>>,
    /// This frame's statsd values, per slot of the plan's `statsd`.
    statsd_values: Vec<Option<f64>>,
    statsd_source: Option<StatsdSource>,
    /// The scalar slots read straight off the snapshot (`proctor_vocab::numbers`).
    scalar_reads: Vec<(usize, proctor_vocab::numbers::NumberRead)>,
    /// The other scalar slots by vocabulary name, for host, container and agent: read off the
    /// shapes' `Serialize`.
    scalar_names: [crate::leaves::Want; 3],
    /// Host fields that are catalog series outside the host shape: (the model's series index,
    /// the scalar slot), read straight from the snapshot's host view.
    host_series: Vec<(usize, usize)>,
    /// The current evaluation's values of the capturing comparison's left side.
    captured: Vec<(Key, f64)>,
    pub stats: EvalStats,
}

impl std::fmt::Debug for Evaluator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Evaluator").field("plan", &self.plan).field("stats", &self.stats).finish_non_exhaustive()
    }
}

/// One snapshot's inputs, prepared once for all programs.
#[allow(missing_debug_implementations)]
pub struct Frame<'a> {
    pub time: f64,
    s: &'a Snapshot,
    ctx: RowCtx,
    groups: Vec<&'a GroupRow>,
}

impl Evaluator {
    pub fn new(plan: Plan, users: BTreeMap<u32, String>) -> Evaluator {
        let windows = (0..plan.windows)
            .map(|i| Window { shared: plan.window_uses.get(i).is_some_and(|&n| n > 1), ..Window::default() })
            .collect();
        let scalars = vec![None; plan.scalars.len()];
        let members = vec![Vec::new(); plan.selectors.len()];
        let reader = |scope: Scope, name: &str| match scope {
            Scope::Host => proctor_vocab::numbers::host(name),
            Scope::Container => proctor_vocab::numbers::container(name),
            Scope::Agent => proctor_vocab::numbers::agent(name),
            Scope::Process | Scope::Group => None,
        };
        let scalar_reads =
            plan.scalars.iter().enumerate().filter_map(|(i, &(sc, n))| Some((i, reader(sc, n)?))).collect();
        let names = |scope: Scope| {
            crate::leaves::Want::new(
                plan.scalars
                    .iter()
                    .enumerate()
                    .filter(|(_, &(sc, n))| sc == scope && reader(sc, n).is_none() && !host_series_name(sc, n))
                    .map(|(i, (_, n))| (*n, i)),
            )
        };
        let scalar_names = [names(Scope::Host), names(Scope::Container), names(Scope::Agent)];
        let host_series = (plan.scalars.iter().enumerate())
            .filter(|(_, (scope, _))| *scope == Scope::Host)
            .filter_map(|(slot, (_, name))| Some((fields::host_series_index(name)?, slot)))
            .collect();
        let statsd_values = vec![None; plan.statsd.len()];
        Evaluator {
            statsd_values,
            statsd_source: None,
            scalar_reads,
            scalar_names,
            host_series,
            plan,
            users,
            windows,
            cache: RowCache::default(),
            spare: RowCache::default(),
            members,
            scalars,
            captured: Vec::new(),
            stats: EvalStats::default(),
        }
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Where statsd values come from (`serve --statsd`); without one they are unknown.
    pub fn set_statsd(&mut self, source: Option<StatsdSource>) {
        self.statsd_source = source;
    }

    /// Reads what `s` offers the plan: scalar slots and selector bits. Call once per snapshot,
    /// then [`Evaluator::run`] each program.
    pub fn frame<'a>(&mut self, s: &'a Snapshot) -> Frame<'a> {
        self.stats.evaluations += 1;
        self.fill_scalars(s);
        if let Some(source) = &self.statsd_source {
            for (slot, r) in self.plan.statsd.iter().enumerate() {
                self.statsd_values[slot] = source(r);
            }
        }
        self.match_rows(&s.rows);
        let mut groups: Vec<&GroupRow> =
            s.groups.as_ref().map(|g| g.groups.iter().map(|(row, _)| row).collect()).unwrap_or_default();
        groups.sort_by(|a, b| a.name.cmp(&b.name));
        Frame { time: s.sample.unix_ns as f64 / 1e9, s, ctx: RowCtx::of(s), groups }
    }

    fn fill_scalars(&mut self, s: &Snapshot) {
        self.scalars.iter_mut().for_each(|v| *v = None);
        for &(slot, read) in &self.scalar_reads {
            if let Some(v) = self.scalars.get_mut(slot) {
                *v = read(s);
            }
        }
        let [host, container, agent] = &self.scalar_names;
        // The walk never descends into a list: the shapes are built without theirs.
        if !host.is_empty() {
            crate::leaves::read(&proctor_vocab::snapshot::host_without_lists(s), host, &mut self.scalars);
        }
        for &(series, slot) in &self.host_series {
            self.scalars[slot] = s.host.series[series];
        }
        if !container.is_empty() {
            crate::leaves::read(&proctor_vocab::snapshot::container_without_lists(s), container, &mut self.scalars);
        }
        if !agent.is_empty() {
            let extras = proctor_vocab::snapshot::AgentExtras::default();
            crate::leaves::read(&proctor_vocab::snapshot::agent(s, &extras), agent, &mut self.scalars);
        }
    }

    fn match_rows(&mut self, rows: &[ProcessRow]) {
        let process_sels: Vec<usize> =
            self.plan.selectors.iter().enumerate().filter(|(_, s)| s.scope == Scope::Process).map(|(i, _)| i).collect();
        let words = self.plan.selectors.len().div_ceil(64).max(1);
        let mut old = std::mem::take(&mut self.cache);
        let same_words = old.words == words;
        let mut old_rows = old.rows.drain(..).enumerate().peekable();
        let mut next = std::mem::take(&mut self.spare);
        next.rows.clear();
        next.bits.clear();
        next.words = words;
        next.rows.reserve(rows.len());
        next.bits.reserve(rows.len() * words);
        self.members.iter_mut().for_each(Vec::clear);
        for (index, r) in rows.iter().enumerate() {
            while old_rows.peek().is_some_and(|(_, c)| c.pid < r.pid) {
                old_rows.next();
            }
            let start = next.bits.len();
            // An unchanged process keeps its bits and its cached row (moved, not cloned).
            match old_rows.next_if(|(_, c)| same_words && c.same(r)) {
                Some((j, cached)) => {
                    next.bits.extend_from_slice(&old.bits[j * words..(j + 1) * words]);
                    next.rows.push(cached);
                    self.stats.selector_rows_reused += 1;
                }
                None => {
                    next.bits.resize(start + words, 0);
                    for &i in &process_sels {
                        if self.plan.selectors[i].matchers.iter().all(|m| self.row_label_matches(m, r)) {
                            next.bits[start + i / 64] |= 1 << (i % 64);
                        }
                    }
                    next.rows.push(CachedRow {
                        pid: r.pid,
                        start: r.start_ticks,
                        uid: r.uid,
                        comm: Arc::clone(&r.comm),
                        cmdline: r.cmdline.clone(),
                        cgroup: r.cgroup.clone(),
                    });
                    self.stats.selector_rows_matched += 1;
                }
            }
            for (w, &word) in next.bits[start..].iter().enumerate() {
                let mut rest = word;
                while rest != 0 {
                    let bit = rest.trailing_zeros() as usize;
                    if let Some(list) = self.members.get_mut(w * 64 + bit) {
                        list.push(index as u32);
                    }
                    rest &= rest - 1;
                }
            }
        }
        drop(old_rows);
        self.spare = old;
        self.cache = next;
    }

    fn row_label_matches(&self, m: &LabelMatch, r: &ProcessRow) -> bool {
        match m.label {
            "name" => m.test(&r.comm),
            // Not yet read: no selector on it matches (it is tried again once read).
            "cmdline" => r.cmdline.as_ref().is_some_and(|c| m.test(&c.join(" "))),
            "user" => m.test(r.uid.and_then(|u| self.users.get(&u)).map_or("", String::as_str)),
            "uid" => m.test(&r.uid.map(|u| u.to_string()).unwrap_or_default()),
            "cgroup" => m.test(r.cgroup.as_deref().unwrap_or("")),
            "pid" => m.test(&r.pid.to_string()),
            "ppid" => m.test(&r.ppid.to_string()),
            "state" => m.test(&r.state.to_string()),
            _ => false,
        }
    }

    fn group_selected(&self, g: &GroupRow, sel: usize) -> bool {
        self.plan.selectors[sel].matchers.iter().all(|m| m.label == "name" && m.test(&g.name))
    }

    /// Evaluates `program` over `frame`: where it holds, and its value there.
    pub fn run(&mut self, program: &Program, frame: &Frame<'_>) -> Outcome {
        self.captured.clear();
        let out = self.eval(&program.root, frame);
        let holds = match out {
            Out::One(v) => {
                if v.truth() {
                    vec![(Key::One, self.captured_value(&Key::One))]
                } else {
                    Vec::new()
                }
            }
            Out::Each(list) => list
                .into_iter()
                .filter(|(_, v)| v.truth())
                .map(|(k, _)| {
                    let value = self.captured_value(&k).or_else(|| self.captured_value(&Key::One));
                    (k, value)
                })
                .collect(),
        };
        Outcome { holds }
    }

    fn captured_value(&self, key: &Key) -> Option<f64> {
        // One comparison captures per program, in key order.
        self.captured.binary_search_by(|(k, _)| k.cmp(key)).ok().map(|i| self.captured[i].1)
    }

    fn eval(&mut self, node: &Node, f: &Frame<'_>) -> Out {
        match node {
            Node::Const(v) => Out::One(v.clone()),
            Node::Scalar(slot) => Out::One(self.scalars[*slot].map_or(Val::Missing, Val::Num)),
            Node::Statsd { slot, millis } => Out::One(
                self.statsd_values
                    .get(*slot)
                    .copied()
                    .flatten()
                    .map_or(Val::Missing, |v| Val::Num(if *millis { v / 1000.0 } else { v })),
            ),
            Node::Proc { sel, read } => Out::Each(
                self.members[*sel]
                    .iter()
                    .map(|&i| &f.s.rows[i as usize])
                    .map(|r| (Key::Process { pid: r.pid, start_ticks: r.start_ticks }, val(read(&f.ctx, r))))
                    .collect(),
            ),
            Node::Group { sel, read } => Out::Each(
                f.groups
                    .iter()
                    .filter(|g| self.group_selected(g, *sel))
                    .map(|g| (Key::Group(Arc::from(g.name.as_str())), val(read(g))))
                    .collect(),
            ),
            Node::Members { scope: Scope::Process, sel } => Out::Each(
                self.members[*sel]
                    .iter()
                    .map(|&i| &f.s.rows[i as usize])
                    .map(|r| (Key::Process { pid: r.pid, start_ticks: r.start_ticks }, Val::Bool(true)))
                    .collect(),
            ),
            Node::Members { sel, .. } => Out::Each(
                f.groups
                    .iter()
                    .filter(|g| self.group_selected(g, *sel))
                    .map(|g| (Key::Group(Arc::from(g.name.as_str())), Val::Bool(true)))
                    .collect(),
            ),
            Node::Agg { op, arg } => {
                let Out::Each(list) = self.eval(arg, f) else { return Out::One(Val::Missing) };
                Out::One(aggregate(*op, &list))
            }
            Node::Over { op, arg, window, slot } => {
                let frame = self.stats.evaluations;
                if let Some((at, v)) = &self.windows[*slot].memo {
                    if *at == frame {
                        return Out::One(v.clone());
                    }
                }
                let out = self.eval(arg, f);
                let w = &mut self.windows[*slot];
                let refused = w.refused;
                let out = match out {
                    Out::One(v) => {
                        let v = over(w, Key::One, v, f.time, *op, *window);
                        if w.shared {
                            w.memo = Some((frame, v.clone()));
                        }
                        Out::One(v)
                    }
                    Out::Each(list) => {
                        let keep: std::collections::HashSet<&Key> = list.iter().map(|(k, _)| k).collect();
                        let before = w.points.len();
                        w.points.retain(|k, _| keep.contains(k));
                        if w.points.len() != before {
                            w.total = w.points.values().map(VecDeque::len).sum();
                        }
                        Out::Each(
                            list.iter()
                                .map(|(k, v)| (k.clone(), over(w, k.clone(), v.clone(), f.time, *op, *window)))
                                .collect(),
                        )
                    }
                };
                // Counted as refused, not summed over every window after each program.
                self.stats.window_points_refused += w.refused - refused;
                out
            }
            Node::Neg(inner) => map(self.eval(inner, f), |v| v.num().map_or(Val::Missing, |n| Val::Num(-n))),
            Node::Not(inner) => map(self.eval(inner, f), |v| match v {
                Val::Bool(b) => Val::Bool(!b),
                _ => Val::Missing,
            }),
            Node::Arith { op, lhs, rhs } => {
                let (l, r) = (self.eval(lhs, f), self.eval(rhs, f));
                combine(&l, &r, false, |a, b| match (a.as_num(), b.as_num()) {
                    (Some(a), Some(b)) => {
                        let v = match op {
                            ArithOp::Add => a + b,
                            ArithOp::Sub => a - b,
                            ArithOp::Mul => a * b,
                            ArithOp::Div if b == 0.0 => return Val::Missing,
                            ArithOp::Div => a / b,
                        };
                        Val::Num(v)
                    }
                    _ => Val::Missing,
                })
            }
            Node::Compare { op, lhs, rhs, regex, capture, sparse } => {
                // The common shape, `process{…}.FIELD OP LITERAL`, in one pass over the
                // selected rows, keeping only those where it holds.
                if let (true, Node::Proc { sel, read }, Node::Const(c)) = (*sparse, lhs.as_ref(), rhs.as_ref()) {
                    let mut out = Vec::new();
                    for &i in &self.members[*sel] {
                        let r = &f.s.rows[i as usize];
                        // Text is compared where the row holds it, and has no number to capture.
                        let (holds, number) = match (read(&f.ctx, r), c) {
                            (Reading::Text(v), Val::Text(k)) => (compare_text(*op, regex.as_ref(), &v, k), None),
                            (Reading::Num(v), Val::Num(k)) => {
                                (compare_num(*op, v, *k), Some(v).filter(|v| v.is_finite()))
                            }
                            (v, c) => {
                                let v = val(v);
                                (compare(*op, regex.as_ref(), &v, c).truth(), v.as_num())
                            }
                        };
                        if holds {
                            let key = Key::Process { pid: r.pid, start_ticks: r.start_ticks };
                            if *capture {
                                if let Some(n) = number {
                                    self.captured.push((key.clone(), n));
                                }
                            }
                            out.push((key, Val::Bool(true)));
                        }
                    }
                    return Out::Each(out);
                }
                let (l, r) = (self.eval(lhs, f), self.eval(rhs, f));
                let mut result = combine(&l, &r, false, |a, b| compare(*op, regex.as_ref(), a, b));
                if *capture {
                    captured_where_true(&l, &result, &mut self.captured);
                }
                if let (true, Out::Each(list)) = (*sparse, &mut result) {
                    list.retain(|(_, v)| v.truth());
                }
                result
            }
            Node::Logic { op, lhs, rhs } => {
                let (l, r) = (self.eval(lhs, f), self.eval(rhs, f));
                let or = *op == LogicOp::Or;
                combine(&l, &r, or, |a, b| {
                    if or {
                        Val::Bool(a.truth() || b.truth())
                    } else {
                        Val::Bool(a.truth() && b.truth())
                    }
                })
            }
        }
    }
}

fn map(out: Out, f: impl Fn(Val) -> Val) -> Out {
    match out {
        Out::One(v) => Out::One(f(v)),
        Out::Each(list) => Out::Each(list.into_iter().map(|(k, v)| (k, f(v))).collect()),
    }
}

/// Applies `f` pairwise: one value to each, or instance to instance by key (an inner join, or
/// with `union` an outer one whose missing side is `Missing`).
fn combine(l: &Out, r: &Out, union: bool, f: impl Fn(&Val, &Val) -> Val) -> Out {
    match (l, r) {
        (Out::One(a), Out::One(b)) => Out::One(f(a, b)),
        (Out::Each(list), Out::One(b)) => Out::Each(list.iter().map(|(k, a)| (k.clone(), f(a, b))).collect()),
        (Out::One(a), Out::Each(list)) => Out::Each(list.iter().map(|(k, b)| (k.clone(), f(a, b))).collect()),
        (Out::Each(a), Out::Each(b)) => {
            let mut out = Vec::with_capacity(a.len().max(b.len()));
            let (mut i, mut j) = (0, 0);
            while i < a.len() || j < b.len() {
                let order = match (a.get(i), b.get(j)) {
                    (Some((ka, _)), Some((kb, _))) => ka.cmp(kb),
                    (Some(_), None) => std::cmp::Ordering::Less,
                    _ => std::cmp::Ordering::Greater,
                };
                match order {
                    std::cmp::Ordering::Equal => {
                        out.push((a[i].0.clone(), f(&a[i].1, &b[j].1)));
                        i += 1;
                        j += 1;
                    }
                    std::cmp::Ordering::Less => {
                        if union {
                            out.push((a[i].0.clone(), f(&a[i].1, &Val::Missing)));
                        }
                        i += 1;
                    }
                    std::cmp::Ordering::Greater => {
                        if union {
                            out.push((b[j].0.clone(), f(&Val::Missing, &b[j].1)));
                        }
                        j += 1;
                    }
                }
            }
            Out::Each(out)
        }
    }
}

/// The numbers of `l` where `result` is true, by key (both sorted by key).
fn captured_where_true(l: &Out, result: &Out, into: &mut Vec<(Key, f64)>) {
    match (l, result) {
        (Out::One(v), Out::One(t)) => {
            if let (Some(n), true) = (v.as_num(), t.truth()) {
                into.push((Key::One, n));
            }
        }
        (Out::One(v), Out::Each(list)) => {
            if let Some(n) = v.as_num() {
                into.extend(list.iter().filter(|(_, t)| t.truth()).map(|(k, _)| (k.clone(), n)));
            }
        }
        (Out::Each(values), Out::Each(list)) => {
            let mut j = 0;
            for (k, _) in list.iter().filter(|(_, t)| t.truth()) {
                while j < values.len() && values[j].0 < *k {
                    j += 1;
                }
                if let Some(n) = values.get(j).filter(|(vk, _)| vk == k).and_then(|(_, v)| v.as_num()) {
                    into.push((k.clone(), n));
                }
            }
        }
        (Out::Each(_), Out::One(_)) => {}
    }
}

fn compare(op: CmpOp, regex: Option<&Regex>, a: &Val, b: &Val) -> Val {
    Val::Bool(match (a, b) {
        (Val::Num(a), Val::Num(b)) => compare_num(op, *a, *b),
        (Val::Text(a), Val::Text(b)) => compare_text(op, regex, a, b),
        // Nothing known compares as false: an unknown value never fires a rule.
        _ => false,
    })
}

/// A number that is not finite is nothing known: it compares as false.
fn compare_num(op: CmpOp, a: f64, b: f64) -> bool {
    if !(a.is_finite() && b.is_finite()) {
        return false;
    }
    match op {
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
        CmpOp::Gt => a > b,
        CmpOp::Lt => a < b,
        CmpOp::Ge => a >= b,
        CmpOp::Le => a <= b,
        _ => false,
    }
}

fn compare_text(op: CmpOp, regex: Option<&Regex>, a: &str, b: &str) -> bool {
    match op {
        CmpOp::Eq => same_text(a, b),
        CmpOp::Ne => !same_text(a, b),
        CmpOp::Match => regex.is_some_and(|re| re.is_match(a)),
        CmpOp::NotMatch => regex.is_some_and(|re| !re.is_match(a)),
        _ => false,
    }
}

/// `a == b`, most often settled by the length and the first byte (a state letter, a name)
/// without the call to `memcmp` that `==` makes: every process, every rule comparing text.
fn same_text(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.as_bytes().first() == b.as_bytes().first() && a == b
}

fn aggregate(op: AggOp, list: &[(Key, Val)]) -> Val {
    if op == AggOp::Count {
        return Val::Num(list.iter().filter(|(_, v)| !matches!(v, Val::Bool(false) | Val::Missing)).count() as f64);
    }
    let nums: Vec<f64> = list.iter().filter_map(|(_, v)| v.clone().num()).collect();
    if nums.is_empty() {
        return if op == AggOp::Sum { Val::Num(0.0) } else { Val::Missing };
    }
    Val::Num(match op {
        AggOp::Sum => nums.iter().sum(),
        AggOp::Avg => nums.iter().sum::<f64>() / nums.len() as f64,
        AggOp::Min => nums.iter().copied().fold(f64::INFINITY, f64::min),
        AggOp::Max => nums.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        AggOp::Count => unreachable!("counted above"),
    })
}

/// Adds `v` at `t` to `key`'s window and folds the window.
fn over(w: &mut Window, key: Key, v: Val, t: f64, op: OverOp, window: f64) -> Val {
    let Some(v) = v.num() else { return Val::Missing };
    let exists = w.points.contains_key(&key);
    if !exists && w.total >= MAX_WINDOW_POINTS {
        w.refused += 1;
        return Val::Missing;
    }
    let points = w.points.entry(key).or_default();
    if points.back().is_some_and(|&(last, _)| t <= last) {
        // Time went backwards or stood still (a replay restarted): start over.
        w.total -= points.len();
        points.clear();
    }
    points.push_back((t, v));
    w.total += 1;
    // Rate without a window keeps the previous point; a window keeps what is inside it.
    let keep_from = if window == 0.0 { f64::NEG_INFINITY } else { t - window };
    while points.len() > 1 && (points[0].0 < keep_from || (window == 0.0 && points.len() > 2)) {
        points.pop_front();
        w.total -= 1;
    }
    match op {
        OverOp::Rate => {
            let (&(t0, v0), &(t1, v1)) = (points.front().expect("one point"), points.back().expect("one point"));
            if points.len() < 2 || t1 <= t0 || v1 < v0 {
                // A counter that went backwards gives no rate, never a negative one.
                return Val::Missing;
            }
            Val::Num((v1 - v0) / (t1 - t0))
        }
        OverOp::Avg => Val::Num(points.iter().map(|p| p.1).sum::<f64>() / points.len() as f64),
        OverOp::Min => Val::Num(points.iter().map(|p| p.1).fold(f64::INFINITY, f64::min)),
        OverOp::Max => Val::Num(points.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live() -> Snapshot {
        let mut sampler = proctor_sampler::Sampler::new(proctor_sampler::SamplerConfig {
            pss_budget: 0.0,
            ..proctor_sampler::SamplerConfig::default()
        });
        let first = sampler.sample();
        std::thread::sleep(std::time::Duration::from_millis(50));
        Snapshot::derive(sampler.sample(), Some(&first))
    }

    /// The issue's own selector: `process{name="api"}.net.retransmits_per_second > 5` holds for
    /// the process named api whose sockets retransmit more than 5 segments a second, and for no
    /// other; without network readings it holds for none.
    #[test]
    fn a_process_network_selector_holds_for_the_retransmitting_process() {
        let mut s = live();
        let me = std::process::id();
        let yaml = "groups:\n  - name: g\n    rules:\n      - alert: Retrans\n        expr: 'process{name=\"api\"}.net.retransmits_per_second > 5'\n";
        let mut set = crate::rules::parse(yaml).unwrap_or_else(|d| panic!("{d:?}"));
        let plan = std::mem::take(&mut set.plan);
        let mut ev = Evaluator::new(plan, BTreeMap::new());
        let frame = ev.frame(&s);
        assert!(ev.run(&set.rules[0].expr, &frame).holds.is_empty());
        let other = s.rows.iter().find(|r| r.pid != me).expect("another row").pid;
        for r in &mut s.rows {
            if r.pid == me || r.pid == other {
                r.comm = Arc::from("api");
                let retransmits_per_sec = if r.pid == me { 7.5 } else { 2.0 };
                r.net = Some(Box::new(proctor_model::NetRates { retransmits_per_sec, ..Default::default() }));
            }
        }
        s.sample.unix_ns += 1_000_000_000;
        let frame = ev.frame(&s);
        let holds = ev.run(&set.rules[0].expr, &frame).holds;
        assert_eq!(holds.len(), 1, "{holds:?}");
        assert_eq!(holds[0].1, Some(7.5));
    }

    /// Rules folding the same series over the same window share it, and each has the value it
    /// would have alone, frame after frame.
    #[test]
    fn a_shared_window_gives_each_rule_its_own_value() {
        let mut s = live();
        let rules = [
            "avg_over(host.load.avg1, 5m) >= 0",
            "max_over(host.load.avg1, 5m) >= 0",
            "avg_over(host.load.avg1, 5m) < 1000",
            "avg_over(host.load.avg1, 10m) >= 0",
            "rate(host.load.avg1) >= -1000 or avg_over(host.load.avg1, 5m) >= 0",
            "avg_over(host.load.avg1, 5m) >= 0",
        ];
        let yaml = |exprs: &[&str]| {
            let mut y = "groups:\n  - name: g\n    rules:\n".to_string();
            for (i, e) in exprs.iter().enumerate() {
                y.push_str(&format!("      - alert: R{i}\n        expr: '{e}'\n"));
            }
            crate::rules::parse(&y).unwrap_or_else(|d| panic!("{d:?}"))
        };
        let all = yaml(&rules);
        assert_eq!(all.plan.windows, 4, "avg 5m, max 5m, avg 10m, rate");
        let mut together = Evaluator::new(all.plan, BTreeMap::new());
        let mut alone: Vec<(crate::rules::RuleSet, Evaluator)> = rules
            .iter()
            .map(|e| {
                let mut set = yaml(&[e]);
                let plan = std::mem::take(&mut set.plan);
                (set, Evaluator::new(plan, BTreeMap::new()))
            })
            .collect();
        for (i, load) in [1.0, 5.0, 2.0, 9.0, 0.5, 3.0].into_iter().enumerate() {
            s.host.load = Some([load, 0.0, 0.0]);
            s.sample.unix_ns += 30_000_000_000 * (1 + i as u64 % 2);
            let frame = together.frame(&s);
            let got: Vec<Outcome> = all.rules.iter().map(|r| together.run(&r.expr, &frame)).collect();
            for ((set, ev), got) in alone.iter_mut().zip(got) {
                let frame = ev.frame(&s);
                assert_eq!(got, ev.run(&set.rules[0].expr, &frame), "{} at load {load}", set.rules[0].expr_text);
            }
        }
    }

    /// The row cache kept between evaluations (each row's selector bits, in buffers reused
    /// from the evaluation before last) selects in each frame what a fresh evaluator selects,
    /// as processes change name, go, and come back renamed.
    #[test]
    fn a_kept_row_cache_selects_what_a_fresh_one_selects() {
        let mut s = live();
        let me = std::process::id();
        let mine = s.rows.iter().find(|r| r.pid == me).expect("this test's row").comm.clone();
        let yaml = format!(
            "groups:\n  - name: g\n    rules:\n      - alert: Mine\n        expr: 'process{{name=\"{mine}\"}}.threads >= 1'\n      - alert: All\n        expr: process.threads >= 1\n      - alert: Re\n        expr: 'process{{name=~\"[a-m].*\"}}.threads >= 1'\n"
        );
        let evaluator = || {
            let mut set = crate::rules::parse(&yaml).unwrap_or_else(|d| panic!("{d:?}"));
            let plan = std::mem::take(&mut set.plan);
            (set, Evaluator::new(plan, BTreeMap::new()))
        };
        let (set, mut kept) = evaluator();
        let other = s.rows.iter().find(|r| r.pid != me).expect("another row").pid;
        for change in 0..6 {
            match change {
                1 => {
                    for r in &mut s.rows {
                        r.comm = if r.pid == me {
                            Arc::from("renamed")
                        } else if r.pid == other {
                            mine.clone()
                        } else {
                            Arc::clone(&r.comm)
                        };
                    }
                }
                2 => s.rows.retain(|r| r.pid % 3 != 0 || r.pid == me || r.pid == other),
                3 => {
                    for r in &mut s.rows {
                        if r.pid == me {
                            r.comm = mine.clone();
                        }
                    }
                }
                _ => {}
            }
            let (_, mut fresh) = evaluator();
            let (a, b) = (kept.frame(&s), fresh.frame(&s));
            for rule in &set.rules {
                let (got, want) = (kept.run(&rule.expr, &a), fresh.run(&rule.expr, &b));
                assert!(!want.holds.is_empty(), "{} selects no process after change {change}", rule.name);
                assert_eq!(got, want, "{} after change {change}", rule.name);
            }
        }
    }

    /// Host, container and agent numbers read straight off the snapshot are those the shapes
    /// serialize, slot for slot, for every series of the catalog a rule may name (the one read
    /// off the clock, `agent.last_sample_age_secs`, is still read off its shape).
    #[test]
    fn every_scalar_is_the_shapes_number() {
        let s = live();
        let mut plan = Plan::default();
        for (full, unit) in catalog::all() {
            let (scope, name) = full.split_once('.').expect("scoped");
            let scope = Scope::parse(scope).expect("a scope");
            if scope.per_instance() || matches!(unit, Unit::Text | Unit::TextList) {
                continue;
            }
            let (name, _) = catalog::resolve(scope, name).expect("a catalog name resolves");
            plan.scalars.push((scope, name));
        }
        assert!(plan.scalars.len() > 100, "{} scalars", plan.scalars.len());
        let mut ev = Evaluator::new(plan, BTreeMap::new());
        assert_eq!(
            ev.scalar_reads.len() + ev.host_series.len() + 1,
            ev.plan.scalars.len(),
            "all but last_sample_age_secs read directly"
        );
        let _ = ev.frame(&s);
        let extras = proctor_vocab::snapshot::AgentExtras::default();
        let mut walked = vec![None; ev.plan.scalars.len()];
        for (scope, out) in [Scope::Host, Scope::Container, Scope::Agent].into_iter().zip(0..) {
            let want = crate::leaves::Want::new(
                ev.plan.scalars.iter().enumerate().filter(|(_, (sc, _))| *sc == scope).map(|(i, (_, n))| (*n, i)),
            );
            match out {
                0 => crate::leaves::read(&proctor_vocab::snapshot::host(&s), &want, &mut walked),
                1 => crate::leaves::read(&proctor_vocab::snapshot::container(&s), &want, &mut walked),
                _ => crate::leaves::read(&proctor_vocab::snapshot::agent(&s, &extras), &want, &mut walked),
            }
        }
        for (i, (scope, name)) in ev.plan.scalars.iter().enumerate() {
            if host_series_name(*scope, name) {
                // A host series outside the shape: the model's number.
                assert_eq!(ev.scalars[i], fields::host_series_value(&s.host, name), "host.{name}");
            } else if *name != "last_sample_age_secs" {
                assert_eq!(ev.scalars[i], walked[i], "{}.{name}", scope.name());
            }
        }
    }

    /// The text fields the state rules compare on every process are read borrowed from the row
    /// (no allocation per process and rule); and a rule over them holds for exactly the
    /// processes whose field compares so.
    #[test]
    fn borrowed_text_is_the_fields_text() {
        let s = live();
        let ctx = RowCtx::of(&s);
        for field in ["name", "state", "cgroup"] {
            let read = fields::process_reader(field).expect(field).row;
            for r in &s.rows {
                let reading = read(&ctx, r);
                assert!(
                    matches!(reading, Reading::Missing | Reading::Text(std::borrow::Cow::Borrowed(_))),
                    "{field} of {}: {reading:?}",
                    r.pid
                );
            }
        }
        let me = s.rows.iter().find(|r| r.pid == std::process::id()).expect("this test's row");
        let yaml = format!(
            "groups:\n  - name: g\n    rules:\n      - alert: S\n        expr: process.state == \"S\"\n      - alert: NotS\n        expr: process.state != \"S\"\n      - alert: Me\n        expr: process.name == \"{}\"\n      - alert: Re\n        expr: process.name =~ \"[a-k].*\"\n",
            me.comm
        );
        let set = crate::rules::parse(&yaml).unwrap_or_else(|d| panic!("{d:?}"));
        let mut ev = Evaluator::new(set.plan, BTreeMap::new());
        let frame = ev.frame(&s);
        let key = |r: &ProcessRow| Key::Process { pid: r.pid, start_ticks: r.start_ticks };
        let expect: [Vec<Key>; 4] = [
            s.rows.iter().filter(|r| r.state == 'S').map(key).collect(),
            s.rows.iter().filter(|r| r.state != 'S').map(key).collect(),
            s.rows.iter().filter(|r| r.comm == me.comm).map(key).collect(),
            s.rows
                .iter()
                .filter(|r| r.comm.chars().next().is_some_and(|c| ('a'..='k').contains(&c)))
                .map(key)
                .collect(),
        ];
        for (rule, want) in set.rules.iter().zip(expect) {
            let got: Vec<Key> = ev.run(&rule.expr, &frame).holds.into_iter().map(|(k, _)| k).collect();
            assert_eq!(got, want, "{}", rule.name);
        }
    }
}

//! The numbers of a published shape by their dotted names, read straight off its `Serialize`:
//! what `serde_json::to_value` then `fields::flatten` would give for a number, without building
//! the JSON tree (a map and a string per field, every evaluation). Only the names asked for are
//! kept; lists are not descended into (their items are not scalars of the shape), nor is any
//! field no wanted name goes through (most of a shape, most evaluations).

use std::fmt;

use serde::ser::{self, Impossible, Serialize};

#[derive(Debug)]
pub struct Stop;

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a shape proctor publishes")
    }
}

impl std::error::Error for Stop {}

impl ser::Error for Stop {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Stop
    }
}

/// The dotted names wanted from a shape, each with its slot, sorted by name: the names under
/// a path are the run of those that begin with it.
#[derive(Debug, Clone, Default)]
pub struct Want(Vec<(&'static str, usize)>);

impl Want {
    pub fn new(names: impl IntoIterator<Item = (&'static str, usize)>) -> Want {
        let mut names: Vec<(&'static str, usize)> = names.into_iter().collect();
        names.sort_unstable();
        Want(names)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Walks `value`, setting `out[slot]` for each numeric leaf whose dotted path is in `want`.
pub fn read<T: Serialize>(value: &T, want: &Want, out: &mut [Option<f64>]) {
    let mut w = Walker { path: String::with_capacity(64), names: &want.0, lo: 0, hi: want.0.len(), out };
    let _ = value.serialize(&mut w);
}

struct Walker<'a> {
    path: String,
    names: &'a [(&'static str, usize)],
    /// `names[lo..hi]`: the wanted names that begin with `path`.
    lo: usize,
    hi: usize,
    out: &'a mut [Option<f64>],
}

/// Where a walker was before it entered a field.
#[derive(Clone, Copy)]
struct Back {
    len: usize,
    lo: usize,
    hi: usize,
}

impl Walker<'_> {
    fn leaf(&mut self, v: f64) -> Result<(), Stop> {
        // The run's first name is the path itself, if the path is wanted.
        if let Some(&(name, slot)) = self.names[self.lo..self.hi].first() {
            if name == self.path {
                if let Some(o) = self.out.get_mut(slot) {
                    *o = Some(v);
                }
            }
        }
        Ok(())
    }

    /// Steps into `key`; `None` (and no step) where no wanted name begins with its path, so
    /// that the field is not walked.
    fn enter(&mut self, key: &str) -> Option<Back> {
        let back = Back { len: self.path.len(), lo: self.lo, hi: self.hi };
        if back.len > 0 {
            self.path.push('.');
        }
        self.path.push_str(key);
        let run = &self.names[self.lo..self.hi];
        let path = self.path.as_str();
        let lo = run.partition_point(|(n, _)| *n < path);
        let hi = run.partition_point(|(n, _)| *n < path || n.starts_with(path));
        if lo == hi {
            self.path.truncate(back.len);
            return None;
        }
        self.hi = self.lo + hi;
        self.lo += lo;
        Some(back)
    }

    fn leave(&mut self, back: Back) {
        self.path.truncate(back.len);
        self.lo = back.lo;
        self.hi = back.hi;
    }
}

/// Lists and variants: not descended into.
struct Skip;

macro_rules! skip_impl {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Skip {
            type Ok = ();
            type Error = Stop;
            fn $method<T: ?Sized + Serialize>(&mut self, _: &T) -> Result<(), Stop> {
                Ok(())
            }
            fn end(self) -> Result<(), Stop> {
                Ok(())
            }
        }
    )*};
}
skip_impl!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl ser::SerializeStructVariant for Skip {
    type Ok = ();
    type Error = Stop;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, _: &'static str, _: &T) -> Result<(), Stop> {
        Ok(())
    }
    fn end(self) -> Result<(), Stop> {
        Ok(())
    }
}

impl<'a, 'b> ser::Serializer for &'b mut Walker<'a> {
    type Ok = ();
    type Error = Stop;
    type SerializeSeq = Skip;
    type SerializeTuple = Skip;
    type SerializeTupleStruct = Skip;
    type SerializeTupleVariant = Skip;
    type SerializeMap = MapWalker<'a, 'b>;
    type SerializeStruct = Self;
    type SerializeStructVariant = Skip;

    fn serialize_bool(self, _: bool) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Stop> {
        self.leaf(f64::from(v))
    }
    fn serialize_i16(self, v: i16) -> Result<(), Stop> {
        self.leaf(f64::from(v))
    }
    fn serialize_i32(self, v: i32) -> Result<(), Stop> {
        self.leaf(f64::from(v))
    }
    fn serialize_i64(self, v: i64) -> Result<(), Stop> {
        self.leaf(v as f64)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Stop> {
        self.leaf(f64::from(v))
    }
    fn serialize_u16(self, v: u16) -> Result<(), Stop> {
        self.leaf(f64::from(v))
    }
    fn serialize_u32(self, v: u32) -> Result<(), Stop> {
        self.leaf(f64::from(v))
    }
    fn serialize_u64(self, v: u64) -> Result<(), Stop> {
        self.leaf(v as f64)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Stop> {
        self.serialize_f64(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), Stop> {
        // serde_json writes a non-finite float as null: no value.
        if v.is_finite() {
            self.leaf(v)
        } else {
            Ok(())
        }
    }
    fn serialize_char(self, _: char) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_str(self, _: &str) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<(), Stop> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, _: &'static str, value: &T) -> Result<(), Stop> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Skip, Stop> {
        Ok(Skip)
    }
    fn serialize_tuple(self, _: usize) -> Result<Skip, Stop> {
        Ok(Skip)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Skip, Stop> {
        Ok(Skip)
    }
    fn serialize_tuple_variant(self, _: &'static str, _: u32, _: &'static str, _: usize) -> Result<Skip, Stop> {
        Ok(Skip)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<MapWalker<'a, 'b>, Stop> {
        Ok(MapWalker { walker: self, key: None })
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, Stop> {
        Ok(self)
    }
    fn serialize_struct_variant(self, _: &'static str, _: u32, _: &'static str, _: usize) -> Result<Skip, Stop> {
        Ok(Skip)
    }
}

impl ser::SerializeStruct for &mut Walker<'_> {
    type Ok = ();
    type Error = Stop;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Result<(), Stop> {
        let Some(back) = self.enter(key) else { return Ok(()) };
        let done = value.serialize(&mut **self);
        self.leave(back);
        done
    }
    fn end(self) -> Result<(), Stop> {
        Ok(())
    }
}

/// A map (the agent's error counts by reason): keys are text.
#[allow(missing_debug_implementations)]
pub struct MapWalker<'a, 'b> {
    walker: &'b mut Walker<'a>,
    key: Option<String>,
}

impl ser::SerializeMap for MapWalker<'_, '_> {
    type Ok = ();
    type Error = Stop;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), Stop> {
        self.key = key.serialize(KeyText).ok();
        Ok(())
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Stop> {
        let Some(key) = self.key.take() else { return Ok(()) };
        let Some(back) = self.walker.enter(&key) else { return Ok(()) };
        let done = value.serialize(&mut *self.walker);
        self.walker.leave(back);
        done
    }
    fn end(self) -> Result<(), Stop> {
        Ok(())
    }
}

/// A map key as text (strings only).
struct KeyText;

impl ser::Serializer for KeyText {
    type Ok = String;
    type Error = Stop;
    type SerializeSeq = Impossible<String, Stop>;
    type SerializeTuple = Impossible<String, Stop>;
    type SerializeTupleStruct = Impossible<String, Stop>;
    type SerializeTupleVariant = Impossible<String, Stop>;
    type SerializeMap = Impossible<String, Stop>;
    type SerializeStruct = Impossible<String, Stop>;
    type SerializeStructVariant = Impossible<String, Stop>;

    fn serialize_str(self, v: &str) -> Result<String, Stop> {
        Ok(v.to_string())
    }
    fn serialize_bool(self, _: bool) -> Result<String, Stop> {
        Err(Stop)
    }
    fn serialize_i8(self, _: i8) -> Result<String, Stop> {
        Err(Stop)
    }
    fn serialize_i16(self, _: i16) -> Result<String, Stop> {
        Err(Stop)
    }
    fn serialize_i32(self, _: i32) -> Result<String, Stop> {
        Err(Stop)
    }
    fn serialize_i64(self, _: i64) -> Result<String, Stop> {
        Err(Stop)
    }
    fn serialize_u8(self, _: u8) -> Result<String, Stop> {
        Err(Stop)
    }
    fn serialize_u16(self, _: u16) -> Result<String, Stop> {
        Err(Stop)
    }
    fn serialize_u32(self, _: u32) -> Result<String, Stop> {
        Err(Stop)
    }
    fn serialize_u64(self, _: u64) -> Result<String, Stop> {
        Err(Stop)
    }
    fn serialize_f32(self, _: f32) -> Result<String, Stop> {
        Err(Stop)
    }
    fn serialize_f64(self, _: f64) -> Result<String, Stop> {
        Err(Stop)
    }
    fn serialize_char(self, _: char) -> Result<String, Stop> {
        Err(Stop)
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<String, Stop> {
        Err(Stop)
    }
    fn serialize_none(self) -> Result<String, Stop> {
        Err(Stop)
    }
    fn serialize_some<T: ?Sized + Serialize>(self, _: &T) -> Result<String, Stop> {
        Err(Stop)
    }
    fn serialize_unit(self) -> Result<String, Stop> {
        Err(Stop)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<String, Stop> {
        Err(Stop)
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, v: &'static str) -> Result<String, Stop> {
        Ok(v.to_string())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, _: &'static str, v: &T) -> Result<String, Stop> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<String, Stop> {
        Err(Stop)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Stop> {
        Err(Stop)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Stop> {
        Err(Stop)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeTupleStruct, Stop> {
        Err(Stop)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Stop> {
        Err(Stop)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Stop> {
        Err(Stop)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Stop> {
        Err(Stop)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Stop> {
        Err(Stop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every numeric leaf the JSON route gives, this gives the same, for a live snapshot's host,
    /// container and agent shapes.
    #[test]
    fn the_same_numbers_as_json_then_flatten() {
        let mut sampler = proctor_sampler::Sampler::new(proctor_sampler::SamplerConfig {
            pss_budget: 0.0,
            ..proctor_sampler::SamplerConfig::default()
        });
        let first = sampler.sample();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let s = proctor_agent::Snapshot::derive(sampler.sample(), Some(&first));
        type Walk<'w> = &'w dyn Fn(&Want, &mut [Option<f64>]);
        let check = |json: serde_json::Value, walk: Walk<'_>| {
            let flat: Vec<(String, f64)> = proctor_vocab::fields::flatten(json)
                .into_iter()
                .filter_map(|(n, v)| v.as_f64().map(|f| (n, f)))
                .collect();
            assert!(flat.len() > 5, "{flat:?}");
            let names: Vec<&'static str> = flat.iter().map(|(n, _)| &*Box::leak(n.clone().into_boxed_str())).collect();
            let want = Want::new(names.iter().enumerate().map(|(i, n)| (*n, i)));
            let mut out = vec![None; names.len()];
            walk(&want, &mut out);
            for (i, (name, v)) in flat.iter().enumerate() {
                assert_eq!(out[i], Some(*v), "{name}");
            }
            // Each name alone (the rest of the shape not walked), and a few beside names that
            // are not there, some a prefix of a name or a name longer than one.
            for (i, (name, v)) in flat.iter().enumerate().step_by(3) {
                let odd: [&'static str; 3] = [
                    Box::leak(format!("{name}x").into_boxed_str()),
                    Box::leak(format!("{name}.x").into_boxed_str()),
                    Box::leak(name[..name.len() - 1].to_string().into_boxed_str()),
                ];
                let want = Want::new([(names[i], 0), (odd[0], 1), (odd[1], 2), (odd[2], 3)]);
                let mut out = vec![None; 4];
                walk(&want, &mut out);
                let known = |o: &str| flat.iter().find(|(n, _)| n == o).map(|(_, v)| *v);
                assert_eq!(out, vec![Some(*v), known(odd[0]), known(odd[1]), known(odd[2])], "{name}");
            }
        };
        let host = proctor_vocab::snapshot::host(&s);
        check(serde_json::to_value(&host).expect("json"), &|w, o| read(&host, w, o));
        let container = proctor_vocab::snapshot::container(&s);
        check(serde_json::to_value(&container).expect("json"), &|w, o| read(&container, w, o));
        let agent = proctor_vocab::snapshot::agent(&s, &proctor_vocab::snapshot::AgentExtras::default());
        check(serde_json::to_value(&agent).expect("json"), &|w, o| read(&agent, w, o));
    }
}

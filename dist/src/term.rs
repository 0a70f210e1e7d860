//! Erlang terms and the conversions between them and Rust values.
//!
//! A message crosses the border as a [`Term`] (the external term format's
//! data model). [`ToTerm`] turns a Rust value into one, [`FromTerm`] turns
//! one back; a term of the wrong shape is a [`ConvertError`] that hands the
//! term back, so nothing is lost. The mapping follows Erlang's habits:
//!
//! | Rust | Erlang |
//! |---|---|
//! | integers | integers (small or big) |
//! | `f32`, `f64` | floats |
//! | `bool` | the atoms `true` / `false` |
//! | `String`, `&str` | binaries (a charlist is accepted back) |
//! | `Vec<T>` | lists |
//! | tuples up to 6 | tuples |
//! | `()` | the atom `ok` |
//! | `Option<T>` | the atom `undefined`, or the value |
//! | `HashMap<K, V>` | maps |
//! | [`Atom`] | atoms |
//! | [`ErlPid`], [`ErlRef`] | pids, references |

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;

pub use erl_dist::term::{Atom, Binary, FixInteger, List, Map, Term, Tuple};

/// An Erlang pid: a process on this node or on another.
///
/// ```
/// use smarm_dist::{ErlPid, ToTerm};
/// let pid = ErlPid::new("beam@localhost", 42, 0, 1);
/// assert_eq!(pid.node.name, "beam@localhost");
/// assert!(matches!(pid.to_term(), smarm_dist::Term::Pid(_)));
/// ```
pub type ErlPid = erl_dist::term::Pid;

/// An Erlang reference (a monitor's, a call's tag).
///
/// ```
/// use smarm_dist::ErlRef;
/// let reference = ErlRef { node: "beam@localhost".into(), id: vec![1, 2, 3], creation: 1 };
/// assert_eq!(reference.id.len(), 3);
/// ```
pub type ErlRef = erl_dist::term::Reference;

/// A term did not have the shape the target type needs; the term is
/// handed back.
///
/// ```
/// use smarm_dist::{FromTerm, ToTerm};
/// let term = "not a number".to_term();
/// let error = i32::from_term(term.clone()).unwrap_err();
/// assert_eq!(error.expected, "an integer");
/// assert_eq!(error.into_term(), term);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ConvertError {
    /// The term that did not convert.
    pub term: Term,
    /// What the target type expected, in words.
    pub expected: &'static str,
}

impl ConvertError {
    /// A conversion error for `term`, which is not `expected`.
    ///
    /// ```
    /// use smarm_dist::{ConvertError, Term, Atom};
    /// let error = ConvertError::new(Term::from(Atom::from("x")), "a binary");
    /// assert_eq!(error.expected, "a binary");
    /// ```
    pub fn new(term: Term, expected: &'static str) -> ConvertError {
        ConvertError { term, expected }
    }

    /// The term that did not convert.
    ///
    /// ```
    /// use smarm_dist::{FromTerm, Term, Atom};
    /// let term = Term::from(Atom::from("x"));
    /// assert_eq!(bool::from_term(term.clone()).unwrap_err().into_term(), term);
    /// ```
    pub fn into_term(self) -> Term {
        self.term
    }
}

impl fmt::Display for ConvertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "expected {}, got the term {}: convert it by hand or change the sender",
            self.expected, self.term
        )
    }
}

impl std::error::Error for ConvertError {}

/// A Rust value that can be sent as an Erlang term.
///
/// ```
/// use smarm_dist::{Atom, ToTerm, Term};
/// let term = (Atom::from("put"), "key", 7u32).to_term();
/// assert_eq!(term.to_string(), "{'put',<<107,101,121>>,7}");
/// ```
pub trait ToTerm {
    /// The term for `self`.
    fn to_term(&self) -> Term;
}

/// A Rust value that can be read back from an Erlang term.
///
/// ```
/// use smarm_dist::{FromTerm, ToTerm};
/// let pair: (String, Vec<i64>) = FromTerm::from_term(("a", vec![1i64, 2]).to_term()).unwrap();
/// assert_eq!(pair, ("a".to_string(), vec![1, 2]));
/// ```
pub trait FromTerm: Sized {
    /// Reads `term`; a term of another shape is an error holding it.
    fn from_term(term: Term) -> Result<Self, ConvertError>;
}

impl ToTerm for Term {
    fn to_term(&self) -> Term {
        self.clone()
    }
}

impl FromTerm for Term {
    fn from_term(term: Term) -> Result<Self, ConvertError> {
        Ok(term)
    }
}

impl<T: ToTerm + ?Sized> ToTerm for &T {
    fn to_term(&self) -> Term {
        (**self).to_term()
    }
}

impl<T: ToTerm + ?Sized> ToTerm for Box<T> {
    fn to_term(&self) -> Term {
        (**self).to_term()
    }
}

/// An integer term's value, whatever its encoding.
fn integer_of(term: &Term) -> Option<i128> {
    match term {
        Term::FixInteger(i) => Some(i128::from(i.value)),
        Term::BigInteger(b) => i128::try_from(&b.value).ok(),
        _ => None,
    }
}

fn integer_term(value: i128) -> Term {
    match i32::try_from(value) {
        Ok(small) => Term::from(FixInteger::from(small)),
        Err(_) => {
            let big = erl_dist::term::BigInteger { value: num_bigint::BigInt::from(value) };
            Term::from(big)
        }
    }
}

macro_rules! integers {
    ($($t:ty),*) => {$(
        impl ToTerm for $t {
            fn to_term(&self) -> Term {
                integer_term(*self as i128)
            }
        }
        impl FromTerm for $t {
            fn from_term(term: Term) -> Result<Self, ConvertError> {
                match integer_of(&term).and_then(|v| <$t>::try_from(v).ok()) {
                    Some(v) => Ok(v),
                    None => Err(ConvertError::new(term, "an integer")),
                }
            }
        }
    )*};
}
integers!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

impl ToTerm for f64 {
    fn to_term(&self) -> Term {
        // NaN and infinities have no Erlang float: they travel as atoms.
        match erl_dist::term::Float::try_from(*self) {
            Ok(f) => Term::from(f),
            Err(_) => Term::from(Atom::from(if self.is_nan() { "nan" } else { "infinity" })),
        }
    }
}

impl FromTerm for f64 {
    fn from_term(term: Term) -> Result<Self, ConvertError> {
        match &term {
            Term::Float(f) => Ok(f.value),
            _ => match integer_of(&term) {
                Some(i) => Ok(i as f64),
                None => Err(ConvertError::new(term, "a float")),
            },
        }
    }
}

impl ToTerm for f32 {
    fn to_term(&self) -> Term {
        f64::from(*self).to_term()
    }
}

impl FromTerm for f32 {
    fn from_term(term: Term) -> Result<Self, ConvertError> {
        f64::from_term(term).map(|f| f as f32)
    }
}

impl ToTerm for bool {
    fn to_term(&self) -> Term {
        Term::from(Atom::from(if *self { "true" } else { "false" }))
    }
}

impl FromTerm for bool {
    fn from_term(term: Term) -> Result<Self, ConvertError> {
        match &term {
            Term::Atom(a) if a.name == "true" => Ok(true),
            Term::Atom(a) if a.name == "false" => Ok(false),
            _ => Err(ConvertError::new(term, "the atom true or false")),
        }
    }
}

impl ToTerm for () {
    fn to_term(&self) -> Term {
        Term::from(Atom::from("ok"))
    }
}

impl FromTerm for () {
    fn from_term(term: Term) -> Result<Self, ConvertError> {
        match &term {
            Term::Atom(a) if a.name == "ok" => Ok(()),
            _ => Err(ConvertError::new(term, "the atom ok")),
        }
    }
}

impl ToTerm for str {
    fn to_term(&self) -> Term {
        Term::from(Binary::from(self.as_bytes()))
    }
}

impl ToTerm for String {
    fn to_term(&self) -> Term {
        self.as_str().to_term()
    }
}

impl FromTerm for String {
    fn from_term(term: Term) -> Result<Self, ConvertError> {
        let bytes = match &term {
            Term::Binary(b) => b.bytes.clone(),
            Term::ByteList(l) => l.bytes.clone(),
            Term::List(l) if l.is_nil() => Vec::new(),
            _ => return Err(ConvertError::new(term, "a binary or a string")),
        };
        String::from_utf8(bytes).map_err(|_| ConvertError::new(term, "UTF-8 text"))
    }
}

impl ToTerm for Atom {
    fn to_term(&self) -> Term {
        Term::from(self.clone())
    }
}

impl FromTerm for Atom {
    fn from_term(term: Term) -> Result<Self, ConvertError> {
        match term {
            Term::Atom(a) => Ok(a),
            other => Err(ConvertError::new(other, "an atom")),
        }
    }
}

impl ToTerm for ErlPid {
    fn to_term(&self) -> Term {
        Term::from(self.clone())
    }
}

impl FromTerm for ErlPid {
    fn from_term(term: Term) -> Result<Self, ConvertError> {
        match term {
            Term::Pid(p) => Ok(p),
            other => Err(ConvertError::new(other, "a pid")),
        }
    }
}

impl ToTerm for ErlRef {
    fn to_term(&self) -> Term {
        Term::from(self.clone())
    }
}

impl FromTerm for ErlRef {
    fn from_term(term: Term) -> Result<Self, ConvertError> {
        match term {
            Term::Reference(r) => Ok(*r),
            other => Err(ConvertError::new(other, "a reference")),
        }
    }
}

impl<T: ToTerm> ToTerm for Vec<T> {
    fn to_term(&self) -> Term {
        self.as_slice().to_term()
    }
}

impl<T: ToTerm> ToTerm for [T] {
    fn to_term(&self) -> Term {
        Term::from(List::from(self.iter().map(ToTerm::to_term).collect::<Vec<_>>()))
    }
}

impl<T: FromTerm> FromTerm for Vec<T> {
    fn from_term(term: Term) -> Result<Self, ConvertError> {
        let elements = match &term {
            Term::List(l) => l.elements.clone(),
            Term::ByteList(l) => l.bytes.iter().map(|b| Term::from(FixInteger::from(*b))).collect(),
            _ => return Err(ConvertError::new(term, "a list")),
        };
        let mut out = Vec::with_capacity(elements.len());
        for element in elements {
            match T::from_term(element) {
                Ok(v) => out.push(v),
                Err(e) => return Err(ConvertError::new(term, e.expected)),
            }
        }
        Ok(out)
    }
}

impl<T: ToTerm> ToTerm for Option<T> {
    fn to_term(&self) -> Term {
        match self {
            Some(v) => v.to_term(),
            None => Term::from(Atom::from("undefined")),
        }
    }
}

impl<T: FromTerm> FromTerm for Option<T> {
    fn from_term(term: Term) -> Result<Self, ConvertError> {
        match &term {
            Term::Atom(a) if a.name == "undefined" => Ok(None),
            _ => T::from_term(term).map(Some),
        }
    }
}

impl<K: ToTerm, V: ToTerm, S> ToTerm for HashMap<K, V, S> {
    fn to_term(&self) -> Term {
        let map: HashMap<Term, Term> = self.iter().map(|(k, v)| (k.to_term(), v.to_term())).collect();
        Term::from(Map::from(map))
    }
}

impl<K: FromTerm + Eq + Hash, V: FromTerm> FromTerm for HashMap<K, V> {
    fn from_term(term: Term) -> Result<Self, ConvertError> {
        let Term::Map(map) = &term else { return Err(ConvertError::new(term, "a map")) };
        let mut out = HashMap::with_capacity(map.map.len());
        for (k, v) in &map.map {
            let key = K::from_term(k.clone()).map_err(|e| e.expected);
            let value = V::from_term(v.clone()).map_err(|e| e.expected);
            match (key, value) {
                (Ok(k), Ok(v)) => {
                    out.insert(k, v);
                }
                (Err(expected), _) | (_, Err(expected)) => return Err(ConvertError::new(term, expected)),
            }
        }
        Ok(out)
    }
}

macro_rules! tuples {
    ($($len:expr => ($($name:ident : $index:tt),*);)*) => {$(
        impl<$($name: ToTerm),*> ToTerm for ($($name,)*) {
            fn to_term(&self) -> Term {
                Term::from(Tuple::from(vec![$(self.$index.to_term()),*]))
            }
        }
        impl<$($name: FromTerm),*> FromTerm for ($($name,)*) {
            fn from_term(term: Term) -> Result<Self, ConvertError> {
                let elements = match &term {
                    Term::Tuple(t) if t.elements.len() == $len => t.elements.clone(),
                    _ => return Err(ConvertError::new(term, concat!("a tuple of ", stringify!($len)))),
                };
                let mut elements = elements.into_iter();
                Ok(($(
                    match elements.next().map($name::from_term) {
                        Some(Ok(v)) => v,
                        Some(Err(e)) => return Err(ConvertError::new(term, e.expected)),
                        None => return Err(ConvertError::new(term, concat!("a tuple of ", stringify!($len)))),
                    },
                )*))
            }
        }
    )*};
}
tuples! {
    1 => (A: 0);
    2 => (A: 0, B: 1);
    3 => (A: 0, B: 1, C: 2);
    4 => (A: 0, B: 1, C: 2, D: 3);
    5 => (A: 0, B: 1, C: 2, D: 3, E: 4);
    6 => (A: 0, B: 1, C: 2, D: 3, E: 4, F: 5);
}

/// The atom `name` as a term.
///
/// ```
/// assert_eq!(smarm_dist::atom("ok"), smarm_dist::Term::from(smarm_dist::Atom::from("ok")));
/// ```
pub fn atom(name: &str) -> Term {
    Term::from(Atom::from(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_round_trip_across_small_and_big() {
        for v in [0i64, -1, i64::from(i32::MAX) + 1, i64::MIN, i64::MAX] {
            assert_eq!(i64::from_term(v.to_term()).unwrap(), v);
        }
        assert!(matches!(5u8.to_term(), Term::FixInteger(_)));
        assert!(matches!(u64::MAX.to_term(), Term::BigInteger(_)));
        assert_eq!(u64::from_term(u64::MAX.to_term()).unwrap(), u64::MAX);
        // Out of range is an error with the term back.
        let error = u8::from_term(300u32.to_term()).unwrap_err();
        assert_eq!(error.term, 300u32.to_term());
    }

    #[test]
    fn nested_values_round_trip() {
        let mut map = HashMap::new();
        map.insert("k".to_string(), vec![Some(1.5f64), None]);
        let back: HashMap<String, Vec<Option<f64>>> = FromTerm::from_term(map.to_term()).unwrap();
        assert_eq!(back, map);
        let t = (true, (), Atom::from("x"), "s", 1u8, -2i8);
        let back: (bool, (), Atom, String, u8, i8) = FromTerm::from_term(t.to_term()).unwrap();
        assert_eq!(back, (true, (), Atom::from("x"), "s".to_string(), 1, -2));
    }

    #[test]
    fn a_wrong_shape_hands_the_whole_term_back() {
        let term = (1u8, "two").to_term();
        let error = <(u8, u8)>::from_term(term.clone()).unwrap_err();
        assert_eq!(error.term, term);
        assert_eq!(error.expected, "an integer");
        let error = <Vec<u8>>::from_term(atom("x")).unwrap_err();
        assert_eq!(error.expected, "a list");
    }

    #[test]
    fn charlists_read_as_strings_and_lists() {
        let term = eetf_bytelist("abc");
        assert_eq!(String::from_term(term.clone()).unwrap(), "abc");
        assert_eq!(<Vec<u8>>::from_term(term).unwrap(), b"abc".to_vec());
    }

    fn eetf_bytelist(s: &str) -> Term {
        // What the BEAM sends for "abc": a STRING_EXT.
        let mut buf = vec![131u8, 107, 0, s.len() as u8];
        buf.extend_from_slice(s.as_bytes());
        Term::decode(buf.as_slice()).unwrap()
    }
}

//! Conformance kit (being filled in).

//! Just enough JSON to read criterion's output files.
//!
//! A strict recursive-descent reader of RFC 8259 values into a [`Value`]
//! tree. Object keys keep their order; a repeated key's last value wins on
//! lookup, as with most readers. Nesting is capped so hostile input cannot
//! overflow the stack.

use std::fmt;

/// Deepest nesting accepted; criterion's files are three levels deep.
const MAX_DEPTH: usize = 64;

/// A parsed JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Value>),
    Object(Vec<(String, Value)>),
}

impl Value {
    /// The member `key` of an object; `None` for a missing key or a non-object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(members) => members.iter().rev().find(|(name, _)| name == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The number, if this is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(number) => Some(*number),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(text) => Some(text),
            _ => None,
        }
    }
}

/// Where and why the text is not JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    /// Byte offset of the problem.
    pub offset: usize,
    pub reason: &'static str,
}

impl fmt::Display for ParseError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "invalid JSON at byte {}: {}", self.offset, self.reason)
    }
}

impl std::error::Error for ParseError {}

/// Parses one JSON value, surrounded by nothing but whitespace.
pub fn parse(text: &str) -> Result<Value, ParseError> {
    let mut reader = Reader { bytes: text.as_bytes(), position: 0 };
    let value = reader.value(0)?;
    reader.skip_whitespace();
    if reader.position != reader.bytes.len() {
        return Err(reader.error("trailing characters after the value"));
    }
    Ok(value)
}

struct Reader<'text> {
    bytes: &'text [u8],
    position: usize,
}

impl Reader<'_> {
    fn error(&self, reason: &'static str) -> ParseError {
        ParseError { offset: self.position, reason }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.position).copied()
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.position += 1;
        }
    }

    fn expect(&mut self, byte: u8, reason: &'static str) -> Result<(), ParseError> {
        if self.peek() == Some(byte) {
            self.position += 1;
            Ok(())
        } else {
            Err(self.error(reason))
        }
    }

    fn keyword(&mut self, word: &str, value: Value) -> Result<Value, ParseError> {
        if self.bytes[self.position..].starts_with(word.as_bytes()) {
            self.position += word.len();
            Ok(value)
        } else {
            Err(self.error("unknown literal"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, ParseError> {
        if depth > MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        self.skip_whitespace();
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(Value::String),
            Some(b'n') => self.keyword("null", Value::Null),
            Some(b't') => self.keyword("true", Value::Bool(true)),
            Some(b'f') => self.keyword("false", Value::Bool(false)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.error("expected a value")),
            None => Err(self.error("unexpected end of input")),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, ParseError> {
        self.position += 1; // '{'
        let mut members = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.position += 1;
            return Ok(Value::Object(members));
        }
        loop {
            self.skip_whitespace();
            if self.peek() != Some(b'"') {
                return Err(self.error("expected an object key"));
            }
            let key = self.string()?;
            self.skip_whitespace();
            self.expect(b':', "expected ':' after an object key")?;
            let value = self.value(depth + 1)?;
            members.push((key, value));
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.position += 1,
                Some(b'}') => {
                    self.position += 1;
                    return Ok(Value::Object(members));
                }
                _ => return Err(self.error("expected ',' or '}' in an object")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, ParseError> {
        self.position += 1; // '['
        let mut elements = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.position += 1;
            return Ok(Value::Array(elements));
        }
        loop {
            elements.push(self.value(depth + 1)?);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.position += 1,
                Some(b']') => {
                    self.position += 1;
                    return Ok(Value::Array(elements));
                }
                _ => return Err(self.error("expected ',' or ']' in an array")),
            }
        }
    }

    /// A number, validated against the JSON grammar, then converted by std.
    fn number(&mut self) -> Result<Value, ParseError> {
        let start = self.position;
        if self.peek() == Some(b'-') {
            self.position += 1;
        }
        match self.peek() {
            Some(b'0') => self.position += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.error("expected a digit")),
        }
        if self.peek() == Some(b'.') {
            self.position += 1;
            self.required_digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.position += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.position += 1;
            }
            self.required_digits()?;
        }
        // The grammar above admits only ASCII, so the slice is valid UTF-8
        // and a valid Rust float literal.
        let text = std::str::from_utf8(&self.bytes[start..self.position])
            .map_err(|_| ParseError { offset: start, reason: "number is not ASCII" })?;
        text.parse()
            .map(Value::Number)
            .map_err(|_| ParseError { offset: start, reason: "number out of range" })
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.position += 1;
        }
    }

    fn required_digits(&mut self) -> Result<(), ParseError> {
        let start = self.position;
        self.digits();
        if self.position == start {
            Err(self.error("expected a digit"))
        } else {
            Ok(())
        }
    }

    fn string(&mut self) -> Result<String, ParseError> {
        self.position += 1; // '"'
        let mut text = String::new();
        loop {
            // Copy the run of plain characters in one go; the input is a
            // &str and the run ends on an ASCII byte, so it is whole UTF-8.
            let start = self.position;
            while matches!(self.peek(), Some(byte) if byte != b'"' && byte != b'\\' && byte >= 0x20) {
                self.position += 1;
            }
            let run = std::str::from_utf8(&self.bytes[start..self.position])
                .map_err(|_| ParseError { offset: start, reason: "string is not UTF-8" })?;
            text.push_str(run);
            match self.peek() {
                Some(b'"') => {
                    self.position += 1;
                    return Ok(text);
                }
                Some(b'\\') => {
                    self.position += 1;
                    text.push(self.escape()?);
                }
                Some(_) => return Err(self.error("control character in a string")),
                None => return Err(self.error("unterminated string")),
            }
        }
    }

    fn escape(&mut self) -> Result<char, ParseError> {
        let byte = self.peek().ok_or_else(|| self.error("unterminated escape"))?;
        self.position += 1;
        Ok(match byte {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => return self.unicode_escape(),
            _ => return Err(self.error("unknown escape")),
        })
    }

    /// `\uXXXX`, joining a UTF-16 surrogate pair written as two escapes.
    fn unicode_escape(&mut self) -> Result<char, ParseError> {
        let first = self.hex4()?;
        let code = match first {
            0xD800..=0xDBFF => {
                if !self.bytes[self.position..].starts_with(b"\\u") {
                    return Err(self.error("unpaired high surrogate"));
                }
                self.position += 2;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(self.error("high surrogate not followed by a low one"));
                }
                0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(self.error("unpaired low surrogate")),
            _ => first,
        };
        char::from_u32(code).ok_or_else(|| self.error("invalid code point"))
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let digits =
            self.bytes.get(self.position..self.position + 4).ok_or_else(|| self.error("short \\u"))?;
        let mut code = 0;
        for &digit in digits {
            let nibble = (digit as char).to_digit(16).ok_or_else(|| self.error("bad hex digit in \\u"))?;
            code = code * 16 + nibble;
        }
        self.position += 4;
        Ok(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_criterion_shaped_estimates() {
        let text = r#"{"mean":{"confidence_interval":{"confidence_level":0.95,"lower_bound":9.5,
            "upper_bound":10.5},"point_estimate":10.0,"standard_error":0.25},"slope":null,
            "tags":[true,false,-1.5e-3,0]}"#;
        let value = parse(text).unwrap();
        assert_eq!(value.get("mean").and_then(|mean| mean.get("point_estimate")), Some(&Value::Number(10.0)));
        assert_eq!(value.get("slope"), Some(&Value::Null));
        assert_eq!(
            value.get("tags"),
            Some(&Value::Array(vec![
                Value::Bool(true),
                Value::Bool(false),
                Value::Number(-0.0015),
                Value::Number(0.0)
            ]))
        );
        assert_eq!(value.get("missing"), None);
    }

    #[test]
    fn decodes_string_escapes() {
        let value = parse(r#""a\"b\\c\/\n\u00e9\ud83d\ude00 ü""#).unwrap();
        assert_eq!(value.as_str(), Some("a\"b\\c/\né\u{1F600} ü"));
    }

    #[test]
    fn rejects_what_is_not_json() {
        for text in [
            "",
            "{",
            "{\"a\" 1}",
            "[1,]",
            "01",
            "1.",
            "-",
            "1e",
            "\"\\x\"",
            "\"\\ud800\"",
            "tru",
            "1 2",
            "\"a\nb\"",
        ] {
            assert!(parse(text).is_err(), "accepted {text:?}");
        }
        let deep = "[".repeat(MAX_DEPTH + 2);
        assert!(parse(&deep).is_err());
    }
}

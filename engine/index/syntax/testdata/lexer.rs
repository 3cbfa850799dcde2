//! A lexer for a small expression language.

use std::fmt;
use std::iter::Peekable;
use std::str::CharIndices;

/// The maximum length of an identifier.
pub const MAX_IDENT: usize = 255;

static KEYWORDS: &[&str] = &["let", "fn", "if", "else", "return"];

/// A position in the source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

/// The kinds of tokens the lexer produces.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenKind {
    Ident(String),
    Keyword(&'static str),
    Number(f64),
    Str(String),
    Op(char),
    LParen,
    RParen,
    Eof,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub kind: TokenKind,
    pub span: Span,
}

#[derive(Debug)]
pub enum LexError {
    UnexpectedChar { ch: char, at: usize },
    UnterminatedString(usize),
    IdentTooLong(Span),
}

impl fmt::Display for LexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LexError::UnexpectedChar { ch, at } => write!(f, "unexpected {:?} at {}", ch, at),
            LexError::UnterminatedString(at) => write!(f, "unterminated string at {}", at),
            LexError::IdentTooLong(span) => write!(f, "identifier too long at {}", span.start),
        }
    }
}

impl std::error::Error for LexError {}

pub trait Source {
    type Item;
    fn next_token(&mut self) -> Result<Self::Item, LexError>;
    fn is_done(&self) -> bool {
        false
    }
}

pub struct Lexer<'a> {
    src: &'a str,
    chars: Peekable<CharIndices<'a>>,
    done: bool,
}

impl<'a> Lexer<'a> {
    pub fn new(src: &'a str) -> Self {
        Lexer { src, chars: src.char_indices().peekable(), done: false }
    }

    fn bump_while(&mut self, start: usize, pred: impl Fn(char) -> bool) -> usize {
        let mut end = start;
        while let Some(&(i, c)) = self.chars.peek() {
            if !pred(c) {
                break;
            }
            end = i + c.len_utf8();
            self.chars.next();
        }
        end
    }

    fn string(&mut self, start: usize) -> Result<Token, LexError> {
        let mut out = String::new();
        while let Some((i, c)) = self.chars.next() {
            match c {
                '"' => {
                    return Ok(Token { kind: TokenKind::Str(out), span: Span { start, end: i + 1 } });
                }
                '\\' => {
                    if let Some((_, esc)) = self.chars.next() {
                        out.push(match esc {
                            'n' => '\n',
                            't' => '\t',
                            other => other,
                        });
                    }
                }
                _ => out.push(c),
            }
        }
        Err(LexError::UnterminatedString(start))
    }
}

impl<'a> Source for Lexer<'a> {
    type Item = Token;

    fn next_token(&mut self) -> Result<Token, LexError> {
        let end_of_input = self.src.len();
        loop {
            let Some((start, c)) = self.chars.next() else {
                self.done = true;
                return Ok(Token { kind: TokenKind::Eof, span: Span { start: end_of_input, end: end_of_input } });
            };
            let kind = match c {
                c if c.is_whitespace() => continue,
                '(' => TokenKind::LParen,
                ')' => TokenKind::RParen,
                '+' | '-' | '*' | '/' | '=' | '<' | '>' => TokenKind::Op(c),
                '"' => return self.string(start),
                c if c.is_ascii_digit() => {
                    let end = self.bump_while(start + 1, |c| c.is_ascii_digit() || c == '.');
                    let value = self.src[start..end].parse().unwrap_or(f64::NAN);
                    return Ok(Token { kind: TokenKind::Number(value), span: Span { start, end } });
                }
                c if c.is_alphabetic() || c == '_' => {
                    let end = self.bump_while(start + 1, |c| c.is_alphanumeric() || c == '_');
                    let span = Span { start, end };
                    if end - start > MAX_IDENT {
                        return Err(LexError::IdentTooLong(span));
                    }
                    let word = &self.src[start..end];
                    let kind = match KEYWORDS.iter().find(|k| **k == word) {
                        Some(k) => TokenKind::Keyword(k),
                        None => TokenKind::Ident(word.to_string()),
                    };
                    return Ok(Token { kind, span });
                }
                ch => return Err(LexError::UnexpectedChar { ch, at: start }),
            };
            return Ok(Token { kind, span: Span { start, end: start + c.len_utf8() } });
        }
    }

    fn is_done(&self) -> bool {
        self.done
    }
}

macro_rules! tokens {
    ($src:expr) => {{
        let mut lx = $crate::Lexer::new($src);
        let mut out = Vec::new();
        loop {
            let t = lx.next_token().unwrap();
            if t.kind == TokenKind::Eof { break; }
            out.push(t.kind);
        }
        out
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexes_numbers_and_ops() {
        assert_eq!(tokens!("1 + 2.5"), vec![TokenKind::Number(1.0), TokenKind::Op('+'), TokenKind::Number(2.5)]);
    }

    #[test]
    fn rejects_unterminated_strings() {
        let mut lx = Lexer::new("\"abc");
        assert!(matches!(lx.next_token(), Err(LexError::UnterminatedString(0))));
    }
}

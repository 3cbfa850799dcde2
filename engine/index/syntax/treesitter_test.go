package syntax

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

type symbolCase struct {
	name string
	lang Lang
	src  string
	want []string // symStrings
	refs map[string][]int32
}

var symbolCases = []symbolCase{
	{
		name: "python",
		lang: LangPython,
		src: `import os

MAX_SIZE = 10
cache, hits = {}, 0
type Pair = tuple[int, int]

# A shape.
@dataclass
class Shape(Base):
    """Doc."""
    sides: int = 0

    def __init__(self, sides):
        self.sides = sides

    @property
    def area(self):
        return lambda x: x * self.sides

async def fetch(url, *args, **kw):
    def inner():
        class Local: pass
    return os.path.join(url, MAX_SIZE)
`,
		want: []string{
			"const MAX_SIZE 3-3 3:1",
			"var cache 4-4 4:1",
			"var hits 4-4 4:8",
			"type Pair 5-5 5:6",
			"class Shape 7-18 9:7",
			"field Shape.sides 11-11 11:5",
			"constructor Shape.__init__ 13-14 13:9",
			"method Shape.area 16-18 17:9",
			"function fetch 20-23 20:11",
		},
		refs: map[string][]int32{
			"os":       {1, 23},
			"MAX_SIZE": {23},
			"sides":    {13, 14, 18}, // parameter and attributes; the class-level field on 11 is its definition
			"self":     nil,          // skipped
			"inner":    {21},         // a local function is no symbol, so its name is a reference
			"Base":     {9},
			"x":        {18},
		},
	},
	{
		name: "javascript",
		lang: LangJavaScript,
		src: `import { x } from "./x";
const LIMIT = 10, other = 2;
let counter = 0;

/** Errors. */
export class HttpError extends Error {
  #code = 0;
  static count = 1;
  constructor(status) { super(); this.status = status; }
  get code() { return this.#code; }
}

export default function handler(req) {
  function local() {}
  return new HttpError(req.status);
}

const send = async (res, body) => { class Inner {} };
var legacy = function () {};
const obj = { meth() {}, arrow: () => 1 };
function* gen() { yield counter; }
`,
		want: []string{
			"const LIMIT 2-2 2:7",
			"const other 2-2 2:19",
			"var counter 3-3 3:5",
			"class HttpError 5-11 6:14",
			"field HttpError.#code 7-7 7:3",
			"field HttpError.count 8-8 8:10",
			"constructor HttpError.constructor 9-9 9:3",
			"method HttpError.code 10-10 10:7",
			"function handler 13-16 13:25",
			"function send 18-18 18:7",
			"function legacy 19-19 19:5",
			"const obj 20-20 20:7",
			"function gen 21-21 21:11",
		},
		refs: map[string][]int32{
			"HttpError": {15},
			"status":    {9, 15},
			"#code":     {10},
			"counter":   {21},
			"meth":      {20}, // an object-literal method is no symbol
			"x":         {1},
		},
	},
	{
		name: "typescript",
		lang: LangTypeScript,
		src: `export const MAX = 10;
/** Doc for Shape. */
export interface Shape {
  area(): number;
  readonly name: string;
}
type Id = string | number;
enum Color { Red, Green = "g" }
export abstract class Base<T> implements Shape {
  private items: T[] = [];
  constructor(public name: string) {}
  abstract area(): number;
  protected get first(): T { return this.items[0]; }
}
export function make(n: number): Shape { return new Square(n); }
namespace NS { export function inside(): Id { return 1; } }
declare module "foo" { export function bar(): void; }
declare function ext(a: Color): void;
`,
		want: []string{
			"const MAX 1-1 1:14",
			"interface Shape 2-6 3:18",
			"method Shape.area 4-4 4:3",
			"field Shape.name 5-5 5:12",
			"type Id 7-7 7:6",
			"enum Color 8-8 8:6",
			"enum_member Color.Red 8-8 8:14",
			"enum_member Color.Green 8-8 8:19",
			"class Base 9-14 9:23",
			"field Base.items 10-10 10:11",
			"constructor Base.constructor 11-11 11:3",
			"method Base.area 12-12 12:12",
			"method Base.first 13-13 13:17",
			"function make 15-15 15:17",
			"module NS 16-16 16:11",
			"function NS.inside 16-16 16:32",
			"module foo 17-17 17:16",
			"function foo.bar 17-17 17:40",
			"function ext 18-18 18:18",
		},
		refs: map[string][]int32{
			"Shape":  {9, 15},
			"Square": {15},
			"items":  {13},
			"Id":     {16},
			"Color":  {18},
			"T":      {9, 10, 13},
			"name":   {11}, // parameter property; the interface field on 5 is a definition
		},
	},
	{
		name: "tsx",
		lang: LangTSX,
		src: `import React from "react";

interface Props { title: string }

export const Card = ({ title }: Props) => (
  <div className="card">
    <Header text={title} />
  </div>
);

export default function App() {
  return <Card title="x" />;
}
`,
		want: []string{
			"interface Props 3-3 3:11",
			"field Props.title 3-3 3:19",
			"function Card 5-9 5:14",
			"function App 11-13 11:25",
		},
		refs: map[string][]int32{
			"Card":   {12},
			"Header": {7},
			"title":  {5, 7, 12},
			"React":  {1},
		},
	},
	{
		name: "rust",
		lang: LangRust,
		src: `use std::fmt;

/// A point.
#[derive(Debug)]
pub struct Point<T> { pub x: T, y: i32 }

pub enum Shape { Circle { r: f64 }, Empty }

impl<T: fmt::Debug> fmt::Display for Point<T> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result { write!(f, "{:?}", self.x) }
}

impl Shape {
    pub const ZERO: i32 = 0;
    pub fn area(&self) -> f64 { let c = |x: f64| x; c(1.0) }
}

pub trait Area { type Out; fn area(&self) -> f64; }

mod inner { pub fn helper() {} }
macro_rules! square { ($x:expr) => { $x * $x }; }
const MAX: usize = 10;
static mut COUNT: u32 = 0;
type Alias = Vec<u8>;
union U { a: u32 }
fn main() { fn nested() {} let p = Point { x: 1, y: 2 }; r#match(p); }
`,
		want: []string{
			"struct Point 3-5 5:12",
			"field Point.x 5-5 5:27",
			"field Point.y 5-5 5:33",
			"enum Shape 7-7 7:10",
			"enum_member Shape.Circle 7-7 7:18",
			"field Circle.r 7-7 7:27",
			"enum_member Shape.Empty 7-7 7:37",
			"method Point.fmt 10-10 10:8",
			"const Shape.ZERO 14-14 14:15",
			"method Shape.area 15-15 15:12",
			"trait Area 18-18 18:11",
			"type Area.Out 18-18 18:23",
			"method Area.area 18-18 18:31",
			"module inner 20-20 20:5",
			"function inner.helper 20-20 20:20",
			"macro square 21-21 21:14",
			"const MAX 22-22 22:7",
			"var COUNT 23-23 23:12",
			"type Alias 24-24 24:6",
			"struct U 25-25 25:7",
			"field U.a 25-25 25:11",
			"function main 26-26 26:4",
		},
		refs: map[string][]int32{
			"fmt":    {1, 9, 10},
			"Point":  {9, 26},
			"x":      {10, 15, 26},
			"nested": {26},
			"match":  {26}, // raw identifier r#match
			"c":      {15},
		},
	},
	{
		name: "java",
		lang: LangJava,
		src: `package com.example;

import java.util.List;

/** Doc. */
@Service
public class Foo<T> extends Bar implements Baz {
    private static final int MAX = 10;
    int a, b;
    public Foo(int a) { this.a = a; }
    @Override
    public <R> R apply(List<R> xs) { Runnable r = () -> {}; new Object() { void hidden() {} }; return xs.get(0); }
    static class Inner { void m() {} }
    interface Cb { void call(int x); int K = 1; }
    enum E { A, B { void f() {} }; E() {} }
    record P(int x, int y) { P { } }
}
@interface Ann { String value() default ""; }
`,
		want: []string{
			"class Foo 5-17 7:14",
			"field Foo.MAX 8-8 8:30",
			"field Foo.a 9-9 9:9",
			"field Foo.b 9-9 9:12",
			"constructor Foo.Foo 10-10 10:12",
			"method Foo.apply 11-12 12:18",
			"class Foo.Inner 13-13 13:18",
			"method Inner.m 13-13 13:31",
			"interface Foo.Cb 14-14 14:15",
			"method Cb.call 14-14 14:25",
			"const Cb.K 14-14 14:42",
			"enum Foo.E 15-15 15:10",
			"enum_member E.A 15-15 15:14",
			"enum_member E.B 15-15 15:17",
			"method B.f 15-15 15:26",
			"constructor E.E 15-15 15:36",
			"class Foo.P 16-16 16:12",
			"field P.x 16-16 16:18",
			"field P.y 16-16 16:25",
			"constructor P.P 16-16 16:30",
			"interface Ann 18-18 18:12",
			"method Ann.value 18-18 18:25",
		},
		refs: map[string][]int32{
			"a":      {10},
			"hidden": {12}, // method of an anonymous class: local
			"List":   {3, 12},
			"xs":     {12},
			"Bar":    {7},
			"R":      {12},
		},
	},
	{
		name: "c",
		lang: LangC,
		src: `#include <stdio.h>
#define MAX 10
#define SQ(x) ((x)*(x))

/* A point. */
struct point { int x, y; struct point *next; };
typedef struct { int a; } anon_t;
typedef struct node node_t;
union u { int i; float f; };
enum color { RED, GREEN = 2 };
typedef enum { ON, OFF } state_t;
static int counter = 0, other;
extern int prototype(int a);
int (*handler)(int);
static const char **names(void) { int local = 1; return 0; }
int main(int argc, char **argv) { struct point p; p.x = SQ(2); return prototype(p.x); }
`,
		want: []string{
			"macro MAX 2-2 2:9",
			"macro SQ 3-3 3:9",
			"struct point 5-6 6:8",
			"field point.x 6-6 6:20",
			"field point.y 6-6 6:23",
			"field point.next 6-6 6:40",
			"field anon_t.a 7-7 7:22", // same line: ordered by the name's column
			"struct anon_t 7-7 7:27",
			"type node_t 8-8 8:21",
			"struct u 9-9 9:7",
			"field u.i 9-9 9:15",
			"field u.f 9-9 9:24",
			"enum color 10-10 10:6",
			"enum_member color.RED 10-10 10:14",
			"enum_member color.GREEN 10-10 10:19",
			"enum_member state_t.ON 11-11 11:16",
			"enum_member state_t.OFF 11-11 11:20",
			"enum state_t 11-11 11:26",
			"var counter 12-12 12:12",
			"var other 12-12 12:25",
			"function prototype 13-13 13:12",
			"var handler 14-14 14:7",
			"function names 15-15 15:21",
			"function main 16-16 16:5",
		},
		refs: map[string][]int32{
			"point":     {6, 16},
			"prototype": {16},
			"SQ":        {16},
			"x":         {3, 16}, // the macro parameter, and the field use
			"local":     {15},
			"node":      {8},
		},
	},
	{
		name: "cpp",
		lang: LangCPP,
		src: `#include <vector>
namespace app {
/// A box.
template <typename T>
class Box : public Base {
public:
    Box(T v) : v_(v) {}
    ~Box();
    T get() const { return v_; }
    virtual void run() = 0;
    static int count;
    bool operator==(const Box& o) const;
private:
    T v_;
};
struct S { int a; void f(); };
enum class Mode { Fast, Slow };
using Vec = std::vector<int>;
template <typename T> Box<T>::~Box() {}
void S::f() { auto l = [](int x) { return x; }; }
}
namespace a::b { int x = 1; }
`,
		want: []string{
			"module app 2-21 2:11",
			"class app.Box 3-15 5:7",
			"constructor Box.Box 7-7 7:5",
			"method Box.~Box 8-8 8:5",
			"method Box.get 9-9 9:7",
			"method Box.run 10-10 10:18",
			"field Box.count 11-11 11:16",
			"method Box.operator== 12-12 12:10",
			"field Box.v_ 14-14 14:7",
			"struct app.S 16-16 16:8",
			"field S.a 16-16 16:16",
			"method S.f 16-16 16:24",
			"enum app.Mode 17-17 17:12",
			"enum_member Mode.Fast 17-17 17:19",
			"enum_member Mode.Slow 17-17 17:25",
			"type app.Vec 18-18 18:7",
			"method Box.~Box 19-19 19:31",
			"method S.f 20-20 20:9",
			"module a::b 22-22 22:11",
			"var a::b.x 22-22 22:22",
		},
		refs: map[string][]int32{
			"Box":    {12, 19}, // definitions on 5, 7 and the destructors' names excluded
			"v_":     {7, 9},
			"S":      {20},
			"vector": {18},
			"std":    {18},
			"x":      {20},
		},
	},
}

func TestAnalyzeTreeSitterSymbols(t *testing.T) {
	for _, tt := range symbolCases {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Analyze(tt.lang, []byte(tt.src), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if a.Lang != tt.lang {
				t.Errorf("Lang = %q, want %q", a.Lang, tt.lang)
			}
			diffStrings(t, symStrings(a.Symbols), tt.want)
			for name, want := range tt.refs {
				if got := refLines(a, name); !slices.Equal(got, want) {
					t.Errorf("refs %q = %v, want %v", name, got, want)
				}
			}
			if msg := checkAnalysis([]byte(tt.src), a, Options{}); msg != "" {
				t.Error(msg)
			}
		})
	}
}

// TestAnalyzeConcurrent runs every language from many goroutines, so the
// race detector sees the shared queries and pooled parsers.
func TestAnalyzeConcurrent(t *testing.T) {
	want := make([][]string, len(symbolCases))
	for i, tc := range symbolCases {
		a, err := Analyze(tc.lang, []byte(tc.src), Options{})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = symStrings(a.Symbols)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < 10; r++ {
				for i, tc := range symbolCases {
					a, err := Analyze(tc.lang, []byte(tc.src), Options{})
					if err != nil {
						t.Error(err)
						return
					}
					if got := symStrings(a.Symbols); !slices.Equal(got, want[i]) {
						t.Errorf("%s: concurrent result differs", tc.name)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

// TestParseBudget feeds input on which tree-sitter's TSX error recovery
// grows without bound (found by FuzzAnalyze): Analyze must give up within
// its budget and index the file as text.
func TestParseBudget(t *testing.T) {
	src := []byte(strings.Repeat("\n", 1465) + "[[[[[" + strings.Repeat("\n", 282) + ":" + strings.Repeat("\n", 617) + "`")
	start := time.Now()
	a, err := Analyze(LangTSX, src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > parseTimeBudget(len(src))+2*time.Second {
		t.Errorf("took %v, budget %v", took, parseTimeBudget(len(src)))
	}
	if !errors.Is(a.Fallback, ErrParseBudget) {
		t.Errorf("Fallback = %v, want ErrParseBudget", a.Fallback)
	}
	if len(a.Symbols) != 0 || len(a.Refs) != 0 || len(a.Chunks) == 0 {
		t.Errorf("symbols %d refs %d chunks %d, want text chunks only", len(a.Symbols), len(a.Refs), len(a.Chunks))
	}
	if msg := checkAnalysis(src, a, Options{}); msg != "" {
		t.Error(msg)
	}
	// The pooled parser was reset: the next parse is a normal one.
	ok := []byte("const a = 1;\n")
	if a, err := Analyze(LangTSX, ok, Options{}); err != nil || a.Fallback != nil || len(a.Symbols) != 1 {
		t.Fatalf("after a cancelled parse: %v %+v", err, a)
	}
}

// TestParserAfterCancelAnywhere cancels parses of a real file after 1, 2,
// 3, ... progress callbacks, so that some land while tree-sitter balances
// the finished tree, and parses normally after each. tree-sitter's
// ts_parser_reset does not clear the state of a cancelled balancing (v0.25:
// canceled_balancing), and a reused parser then aborts the process on its
// next parse (assertion self->finished_tree.ptr); a cancelled parser must
// not go back to the pool.
func TestParserAfterCancelAnywhere(t *testing.T) {
	var b strings.Builder
	for i := range 40 {
		fmt.Fprintf(&b, "def f%d(a, b):\n    return [a + b * %d for _ in range(3)]\n\n", i, i)
	}
	src := []byte(b.String())
	ok := []byte("def g():\n    pass\n")
	defer func(f func(int) int) { callBudget = f }(callBudget)
	cancelled := 0
	for limit := 1; ; limit++ {
		callBudget = func(int) int { return limit }
		a, err := Analyze(LangPython, src, Options{})
		if err != nil {
			t.Fatal(err)
		}
		callBudget = parseCallBudget
		if got, err := Analyze(LangPython, ok, Options{}); err != nil || got.Fallback != nil || len(got.Symbols) != 1 {
			t.Fatalf("after a parse cancelled at %d callbacks: %v %+v", limit, err, got)
		}
		if a.Fallback == nil {
			break // the whole parse fits: every cancellation point was tried
		}
		cancelled++
	}
	if cancelled == 0 {
		t.Fatal("no parse was cancelled")
	}
}

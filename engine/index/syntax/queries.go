package syntax

import (
	"unsafe"

	tsc "github.com/tree-sitter/tree-sitter-c/bindings/go"
	tscpp "github.com/tree-sitter/tree-sitter-cpp/bindings/go"
	tsjava "github.com/tree-sitter/tree-sitter-java/bindings/go"
	tsjs "github.com/tree-sitter/tree-sitter-javascript/bindings/go"
	tspy "github.com/tree-sitter/tree-sitter-python/bindings/go"
	tsrust "github.com/tree-sitter/tree-sitter-rust/bindings/go"
	tsts "github.com/tree-sitter/tree-sitter-typescript/bindings/go"
)

// A language's query names its captures by role:
//
//	@def.KIND   the whole definition (KIND is a Kind: function, class, ...)
//	@name       the definition's name node
//	@decl       a C/C++ declarator holding the name ("*f(int)",
//	            "Box::run()"); it also tells a function from a variable
//	@scope      a container that is not itself a symbol (a Rust impl)
//	@scope.name the name of the type a @scope belongs to
//	@local      an anonymous function or class: definitions inside it are
//	            local, as are definitions inside any function
//	@wrap       a node that wraps a definition (export, decorators,
//	            template<...>); the definition's range grows to cover it
//	@wrapped    the wrapped child of a @wrap
//	@doc        a comment or attribute; one on the lines just above a
//	            definition joins its range
//	@ref        an identifier recorded as a reference
//
// A function found inside a class, struct, interface, trait, enum or impl
// becomes a method. When several patterns find a definition with the same
// name node, the widest definition wins, then the earliest pattern.

// tsConfig describes one tree-sitter language.
type tsConfig struct {
	lang     Lang
	language func() unsafe.Pointer
	query    string
	// ctorName is the method name that makes a constructor ("__init__").
	ctorName string
	// ctorIsClassName makes a method named like its class a constructor
	// (C++; Java's constructors have a node of their own).
	ctorIsClassName bool
	// skipRefs are names never recorded as references.
	skipRefs []string
	// upperConst turns module-level variables named in UPPER_CASE into
	// constants (Python).
	upperConst bool
	// rawIdent strips Rust's "r#" from raw identifiers.
	rawIdent bool
}

const pythonQuery = `
(class_definition name: (identifier) @name) @def.class
(function_definition name: (identifier) @name) @def.function
(type_alias_statement left: (type (identifier) @name)) @def.type
(module (expression_statement (assignment left: (identifier) @name)) @def.var)
(module (expression_statement (assignment left: (pattern_list (identifier) @name))) @def.var)
(class_definition body: (block (expression_statement (assignment left: (identifier) @name)) @def.field))
(lambda) @local
(decorated_definition definition: (_) @wrapped) @wrap
(comment) @doc
(identifier) @ref
`

// jsCommonQuery holds the patterns JavaScript and TypeScript share.
const jsCommonQuery = `
(function_declaration name: (identifier) @name) @def.function
(generator_function_declaration name: (identifier) @name) @def.function
(class_body (method_definition name: [(property_identifier) (private_property_identifier)] @name) @def.method)
(lexical_declaration (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression) (generator_function)])) @def.function
(variable_declaration (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression) (generator_function)])) @def.function
(lexical_declaration "const" (variable_declarator name: (identifier) @name)) @def.const
(lexical_declaration "let" (variable_declarator name: (identifier) @name)) @def.var
(variable_declaration (variable_declarator name: (identifier) @name)) @def.var
[(arrow_function) (function_expression) (generator_function) (class)] @local
(export_statement declaration: (_) @wrapped) @wrap
(comment) @doc
`

const javascriptQuery = jsCommonQuery + `
(class_declaration name: (identifier) @name) @def.class
(class_body (field_definition property: [(property_identifier) (private_property_identifier)] @name) @def.field)
[(identifier) (property_identifier) (private_property_identifier) (shorthand_property_identifier) (shorthand_property_identifier_pattern)] @ref
`

const typescriptQuery = jsCommonQuery + `
(class_declaration name: (type_identifier) @name) @def.class
(abstract_class_declaration name: (type_identifier) @name) @def.class
(class_body (public_field_definition name: [(property_identifier) (private_property_identifier)] @name) @def.field)
(class_body (abstract_method_signature name: [(property_identifier) (private_property_identifier)] @name) @def.method)
(class_body (method_signature name: [(property_identifier) (private_property_identifier)] @name) @def.method)
(function_signature name: (identifier) @name) @def.function
(interface_declaration name: (type_identifier) @name) @def.interface
(interface_body (method_signature name: (property_identifier) @name) @def.method)
(interface_body (property_signature name: (property_identifier) @name) @def.field)
(type_alias_declaration name: (type_identifier) @name) @def.type
(enum_declaration name: (identifier) @name) @def.enum
(enum_body (property_identifier) @name @def.enum_member)
(enum_body (enum_assignment name: (property_identifier) @name) @def.enum_member)
(internal_module name: (_) @name) @def.module
(module name: (_) @name) @def.module
(ambient_declaration (_) @wrapped) @wrap
[(identifier) (type_identifier) (property_identifier) (private_property_identifier) (shorthand_property_identifier) (shorthand_property_identifier_pattern)] @ref
`

const rustQuery = `
(function_item name: (identifier) @name) @def.function
(function_signature_item name: (identifier) @name) @def.function
(struct_item name: (type_identifier) @name) @def.struct
(union_item name: (type_identifier) @name) @def.struct
(enum_item name: (type_identifier) @name) @def.enum
(enum_variant name: (identifier) @name) @def.enum_member
(trait_item name: (type_identifier) @name) @def.trait
(type_item name: (type_identifier) @name) @def.type
(associated_type name: (type_identifier) @name) @def.type
(mod_item name: (identifier) @name) @def.module
(macro_definition name: (identifier) @name) @def.macro
(const_item name: (identifier) @name) @def.const
(static_item name: (identifier) @name) @def.var
(field_declaration_list (field_declaration name: (field_identifier) @name) @def.field)
(impl_item type: [
  (type_identifier) @scope.name
  (generic_type type: (type_identifier) @scope.name)
  (generic_type type: (scoped_type_identifier name: (type_identifier) @scope.name))
  (scoped_type_identifier name: (type_identifier) @scope.name)
]) @scope
(closure_expression) @local
[(line_comment) (block_comment) (attribute_item)] @doc
[(identifier) (type_identifier) (field_identifier) (shorthand_field_identifier)] @ref
`

const javaQuery = `
(class_declaration name: (identifier) @name) @def.class
(record_declaration name: (identifier) @name) @def.class
(interface_declaration name: (identifier) @name) @def.interface
(annotation_type_declaration name: (identifier) @name) @def.interface
(enum_declaration name: (identifier) @name) @def.enum
(enum_constant name: (identifier) @name) @def.enum_member
(method_declaration name: (identifier) @name) @def.method
(annotation_type_element_declaration name: (identifier) @name) @def.method
(constructor_declaration name: (identifier) @name) @def.constructor
(compact_constructor_declaration name: (identifier) @name) @def.constructor
(field_declaration declarator: (variable_declarator name: (identifier) @name)) @def.field
(constant_declaration declarator: (variable_declarator name: (identifier) @name)) @def.const
(record_declaration parameters: (formal_parameters (formal_parameter name: (identifier) @name) @def.field))
(lambda_expression) @local
(object_creation_expression (class_body) @local)
[(line_comment) (block_comment)] @doc
[(identifier) (type_identifier)] @ref
`

// cCommonQuery holds the patterns C and C++ share. Declarations come in
// through @decl, which the resolver follows to the name.
const cCommonQuery = `
(type_definition type: [(struct_specifier !name body: (_)) (union_specifier !name body: (_))] declarator: (_) @decl) @def.struct
(type_definition type: (enum_specifier !name body: (_)) declarator: (_) @decl) @def.enum
(type_definition declarator: (_) @decl) @def.type
(function_definition declarator: (_) @decl) @def.function
(declaration declarator: (_) @decl) @def.var
(field_declaration declarator: (_) @decl) @def.field
(union_specifier name: (_) @decl body: (_)) @def.struct
(enumerator name: (identifier) @name) @def.enum_member
(preproc_def name: (identifier) @name) @def.macro
(preproc_function_def name: (identifier) @name) @def.macro
(comment) @doc
`

const cQuery = cCommonQuery + `
(struct_specifier name: (_) @decl body: (_)) @def.struct
(enum_specifier name: (_) @decl body: (_)) @def.enum
[(identifier) (type_identifier) (field_identifier)] @ref
`

const cppQuery = cCommonQuery + `
(class_specifier name: (_) @decl body: (_)) @def.class
(struct_specifier name: (_) @decl body: (_)) @def.struct
(enum_specifier name: (_) @decl body: (_)) @def.enum
(namespace_definition name: (_) @name) @def.module
(alias_declaration name: (type_identifier) @name) @def.type
(concept_definition name: (identifier) @name) @def.type
(template_declaration (_) @wrapped) @wrap
(lambda_expression) @local
[(identifier) (type_identifier) (field_identifier) (namespace_identifier)] @ref
`

var tsConfigs = []*tsConfig{
	{lang: LangPython, language: tspy.Language, query: pythonQuery, ctorName: "__init__", skipRefs: []string{"self"}, upperConst: true},
	{lang: LangJavaScript, language: tsjs.Language, query: javascriptQuery, ctorName: "constructor"},
	{lang: LangTypeScript, language: tsts.LanguageTypescript, query: typescriptQuery, ctorName: "constructor"},
	{lang: LangTSX, language: tsts.LanguageTSX, query: typescriptQuery, ctorName: "constructor"},
	{lang: LangRust, language: tsrust.Language, query: rustQuery, rawIdent: true},
	{lang: LangJava, language: tsjava.Language, query: javaQuery},
	{lang: LangC, language: tsc.Language, query: cQuery},
	{lang: LangCPP, language: tscpp.Language, query: cppQuery, ctorIsClassName: true},
}

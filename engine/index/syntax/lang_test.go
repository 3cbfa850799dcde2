package syntax

import "testing"

func TestDetect(t *testing.T) {
	tests := []struct {
		path string
		head string
		want Lang
	}{
		{"main.go", "", LangGo},
		{"pkg/sub/file_test.go", "", LangGo},
		{`C:\src\app.PY`, "", LangPython},
		{"stubs/os.pyi", "", LangPython},
		{"web/app.js", "", LangJavaScript},
		{"web/app.mjs", "", LangJavaScript},
		{"web/App.jsx", "", LangJavaScript},
		{"web/store.ts", "", LangTypeScript},
		{"web/types.d.ts", "", LangTypeScript},
		{"web/App.tsx", "", LangTSX},
		{"src/lib.rs", "", LangRust},
		{"src/Main.java", "", LangJava},
		{"src/hash.c", "", LangC},
		{"src/hash.h", "#include <stdint.h>\nstruct x { int a; };\n", LangC},
		{"src/box.h", "#pragma once\nnamespace app {\n", LangCPP},
		{"src/box.h", "class Box {\npublic:\n", LangCPP},
		{"src/io.h", "#include <stdio.h>\n#include <sys/types.h>\n", LangC},
		{"src/io.h", "#include <stdio.h>\n#include <vector>\n", LangCPP},
		{"src/gen.h", "// generated\nstatic_assert(X == 1, \"v\");\n", LangCPP},
		{"src/box.hpp", "", LangCPP},
		{"src/graph.cc", "", LangCPP},
		{"README.md", "", LangMarkdown},
		{"build.sh", "", LangShell},
		{"runtime/asm_amd64.s", "", LangAssembly},
		{"runtime/asm_arm64.S", "", LangAssembly},
		{"Makefile", "", LangMakefile},
		{"sub/GNUmakefile", "", LangMakefile},
		{"rules.mk", "", LangMakefile},
		{"Dockerfile", "", LangDockerfile},
		{"Dockerfile.dev", "", LangDockerfile},
		{"build/app.dockerfile", "", LangDockerfile},
		{".bashrc", "", LangShell},
		{"config.yml", "", LangYAML},
		{"package.json", "", LangJSON},
		{"Cargo.toml", "", LangTOML},
		{"pom.xml", "", LangXML},
		{"index.html", "", LangHTML},
		{"style.scss", "", LangCSS},
		{"schema.sql", "", LangSQL},
		{"api.proto", "", LangProtobuf},
		{"go.mod", "", LangText},
		{"LICENSE", "", LangText},
		// Shebangs decide only when the path says nothing.
		{"bin/tool", "#!/usr/bin/env python3\nimport sys\n", LangPython},
		{"bin/tool", "#!/usr/bin/python3.12 -u\n", LangPython},
		{"bin/serve", "#!/usr/bin/env node\n", LangJavaScript},
		{"bin/run", "#!/usr/bin/env -S deno run --allow-net\n", LangTypeScript},
		{"configure", "#!/bin/sh\n", LangShell},
		{"script", "#! /bin/bash -e\n", LangShell},
		{"script", "#!/usr/bin/env FOO=1 bash\n", LangShell},
		{"script", "#!/usr/bin/perl\n", LangText},
		{"script", "#!\n", LangText},
		{"notes.txt", "#!/bin/sh\n", LangText}, // the extension is known: text
		{"main.go", "#!/bin/sh\n", LangGo},
		{"", "", LangText},
		{"dir/", "", LangText},
		{".hidden", "", LangText},
	}
	for _, tt := range tests {
		if got := Detect(tt.path, []byte(tt.head)); got != tt.want {
			t.Errorf("Detect(%q, %q) = %q, want %q", tt.path, tt.head, got, tt.want)
		}
	}
}

func TestSupported(t *testing.T) {
	for _, l := range []Lang{LangGo, LangPython, LangJavaScript, LangTypeScript, LangTSX, LangRust, LangJava, LangC, LangCPP} {
		if !Supported(l) {
			t.Errorf("Supported(%q) = false", l)
		}
		if l == LangGo {
			continue
		}
		if _, err := loadLang(l); err != nil {
			t.Errorf("query for %s: %v", l, err)
		}
	}
	for _, l := range []Lang{LangMarkdown, LangShell, LangText, "", "cobol"} {
		if Supported(l) {
			t.Errorf("Supported(%q) = true", l)
		}
	}
}

// Package nodetree generates a tree of text shaped like an installed
// node_modules (thousands of small JavaScript, JSON and Markdown files,
// and some minified bundles whose lines run from 100 KB to 1 MB), with a
// few secrets of gitleaks' common kinds planted in it: what the secret
// scanner's tests, fuzzing and benchmark read. It is deterministic: the
// same size and seed give the same files.
package nodetree

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// File is one generated file: a slash-separated path under
// node_modules/, and its text.
type File struct {
	Path string
	Text string
}

// Secret is a planted secret: the file and 1-based line it is on, and
// the id of the gitleaks rule that finds it.
type Secret struct {
	Path string
	Line int
	Rule string
}

// Generate calls each with files until they add up to about size bytes,
// and returns the secrets it planted in them. It stops at the first
// error each returns.
func Generate(size int64, seed uint64, each func(File) error) ([]Secret, error) {
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	var total int64
	for pkg := 0; total < size; pkg++ {
		for _, f := range g.pkg(pkg, size) {
			total += int64(len(f.Text))
			if err := each(f); err != nil {
				return nil, err
			}
		}
	}
	return g.planted, nil
}

// Write generates the files under dir (dir/node_modules/...).
func Write(dir string, size int64, seed uint64) ([]Secret, error) {
	return Generate(size, seed, func(f File) error {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, []byte(f.Text), 0o644)
	})
}

type gen struct {
	r       *rand.Rand
	planted []Secret
	n       int // files made, for planting
}

// words are what identifiers and prose are made of: the keywords
// gitleaks' rules look for are among them, as they are in real
// packages, so the detector cannot skip most text on keywords alone.
var words = strings.Fields(`the a to of and in is for on with as by it be this that from or
	value key keys token tokens api apis auth access secret password passwd credential creds
	options config request response error callback resolve reject promise buffer stream
	module exports require function return const let var if else typeof undefined null
	length index item items node parse string number object array map set get has
	private public client server header headers body method path url query params data
	event emit listener handler state props children render update create delete merge
	private_key apiKey accessToken authToken secretKey sessionToken bearer hash digest`)

func (g *gen) word() string { return words[g.r.IntN(len(words))] }

func (g *gen) ident() string {
	w := g.word()
	if g.r.IntN(3) == 0 {
		w += strings.ToUpper(g.word()[:1]) + g.word()[1:]
	}
	return w
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

func (g *gen) rnd(alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[g.r.IntN(len(alphabet))]
	}
	return string(b)
}

// pkg returns one package's files. One package in twenty ships a
// minified bundle, whose single line is 100 KB to 1 MB
// (at most a quarter of size more than 100 KB).
func (g *gen) pkg(i int, size int64) []File {
	name := fmt.Sprintf("%s-%s%d", g.word(), g.word(), i)
	if i%7 == 3 {
		name = fmt.Sprintf("@%s/%s", g.word(), name)
	}
	dir := "node_modules/" + name + "/"
	files := []File{
		{dir + "package.json", g.packageJSON(name)},
		{dir + "README.md", g.readme(name)},
		{dir + "LICENSE", license},
		{dir + "index.js", g.js(20 + g.r.IntN(200))},
	}
	for j := range g.r.IntN(6) {
		files = append(files, File{fmt.Sprintf("%slib/%s%d.js", dir, g.word(), j), g.js(10 + g.r.IntN(300))})
	}
	if i%20 == 5 {
		files = append(files, File{dir + "dist/" + strings.TrimPrefix(name, "@") + ".min.js", g.minified(100<<10 + g.r.IntN(int(min(900<<10, max(size/4, 1)))))})
	}
	for k := range files {
		files[k].Text = g.plant(files[k])
	}
	return files
}

func (g *gen) packageJSON(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{\n  \"name\": %q,\n  \"version\": \"%d.%d.%d\",\n", name, g.r.IntN(9), g.r.IntN(30), g.r.IntN(20))
	fmt.Fprintf(&b, "  \"description\": \"%s %s %s\",\n  \"main\": \"index.js\",\n", g.word(), g.word(), g.word())
	b.WriteString("  \"dependencies\": {\n")
	for j := range 1 + g.r.IntN(8) {
		if j > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, "    \"%s-%s\": \"^%d.%d.0\"", g.word(), g.word(), g.r.IntN(9), g.r.IntN(20))
	}
	b.WriteString("\n  },\n")
	// What lockfiles and package metadata are full of: digests that look
	// random to an entropy check.
	fmt.Fprintf(&b, "  \"_integrity\": \"sha512-%s==\",\n", g.rnd(alnum+"+/", 86))
	fmt.Fprintf(&b, "  \"_shasum\": \"%s\",\n", g.rnd("0123456789abcdef", 40))
	b.WriteString("  \"license\": \"MIT\"\n}\n")
	return b.String()
}

func (g *gen) readme(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", name)
	for range 5 + g.r.IntN(40) {
		for range 8 + g.r.IntN(12) {
			b.WriteString(g.word())
			b.WriteByte(' ')
		}
		b.WriteString("\n")
		if g.r.IntN(5) == 0 {
			fmt.Fprintf(&b, "\n```js\nconst %s = require('%s');\n%s.%s({ %s: process.env.%s });\n```\n\n", g.ident(), name, g.ident(), g.ident(), g.ident(), strings.ToUpper(g.word()))
		}
	}
	return b.String()
}

// statement is one line of ordinary JavaScript.
func (g *gen) statement() string {
	switch g.r.IntN(8) {
	case 0:
		return fmt.Sprintf("const %s = require('./%s');", g.ident(), g.word())
	case 1:
		return fmt.Sprintf("function %s(%s, %s) { return %s.%s(%s); }", g.ident(), g.ident(), g.ident(), g.ident(), g.ident(), g.ident())
	case 2:
		return fmt.Sprintf("if (typeof %s.%s === 'undefined') { %s.%s = %s; }", g.ident(), g.ident(), g.ident(), g.ident(), g.ident())
	case 3:
		return fmt.Sprintf("  %s: %s.%s || '%s',", g.ident(), g.ident(), g.ident(), g.word())
	case 4:
		return fmt.Sprintf("var %s = '%s';", g.ident(), g.rnd(alnum, 8+g.r.IntN(24)))
	case 5:
		return fmt.Sprintf("// %s %s %s %s", g.word(), g.word(), g.word(), g.word())
	case 6:
		return fmt.Sprintf("module.exports.%s = %s;", g.ident(), g.ident())
	default:
		return fmt.Sprintf("this.%s = options.%s !== undefined ? options.%s : null;", g.ident(), g.ident(), g.ident())
	}
}

func (g *gen) js(lines int) string {
	var b strings.Builder
	b.WriteString("'use strict';\n\n")
	for range lines {
		b.WriteString(g.statement())
		b.WriteByte('\n')
	}
	return b.String()
}

// minified is one line of about n bytes, as a bundler writes it.
func (g *gen) minified(n int) string {
	var b strings.Builder
	b.Grow(n + 256)
	b.WriteString("!function(e,t){\"use strict\";")
	for b.Len() < n {
		switch g.r.IntN(5) {
		case 0:
			fmt.Fprintf(&b, "var %s=function(e){return e.%s(t.%s)};", g.ident(), g.ident(), g.ident())
		case 1:
			fmt.Fprintf(&b, "e.%s=\"%s-%s\",", g.ident(), g.word(), g.word())
			if g.r.IntN(40) == 0 { // now and then a digest or an id
				fmt.Fprintf(&b, "e.%s=\"%s\",", g.ident(), g.rnd(alnum, 6+g.r.IntN(30)))
			}
		case 2:
			fmt.Fprintf(&b, "{%s:%s,%s:\"%s\"}", g.ident(), g.ident(), g.ident(), g.word())
		case 3:
			fmt.Fprintf(&b, "if(!%s.%s)throw new Error(\"%s %s\");", g.ident(), g.ident(), g.word(), g.word())
		default:
			fmt.Fprintf(&b, "t.%s(%s,%d);", g.ident(), g.ident(), g.r.IntN(100000))
		}
	}
	b.WriteString("}(this);\n")
	return b.String()
}

// plant puts a secret into about one file in 100: a line added to a
// small file, or text inside a minified line.
func (g *gen) plant(f File) string {
	g.n++
	if g.n%100 != 17 {
		return f.Text
	}
	kind := (g.n / 100) % len(plants)
	p := plants[kind]
	secret := p.make(g)
	if strings.HasSuffix(f.Path, ".min.js") && !strings.Contains(secret, "\n") {
		// Into the middle of the bundle's one line.
		at := len(f.Text) / 2
		at += strings.IndexByte(f.Text[at:], ';') + 1
		g.planted = append(g.planted, Secret{Path: f.Path, Line: 1, Rule: p.rule})
		return f.Text[:at] + secret + ";" + f.Text[at:]
	}
	line := strings.Count(f.Text, "\n") + 1
	g.planted = append(g.planted, Secret{Path: f.Path, Line: line, Rule: p.rule})
	return f.Text + secret + "\n"
}

var plants = []struct {
	rule string
	make func(*gen) string
}{
	{"aws-access-token", func(g *gen) string {
		return "var awsId=\"AKIA" + g.rnd("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16) + "\""
	}},
	{"github-pat", func(g *gen) string { return "var gh=\"ghp_" + g.rnd(alnum, 36) + "\"" }},
	{"private-key", func(g *gen) string {
		var b strings.Builder
		b.WriteString("-----BEGIN RSA PRIVATE KEY-----\n")
		for range 6 {
			b.WriteString(g.rnd(alnum+"+/", 64))
			b.WriteByte('\n')
		}
		b.WriteString("-----END RSA PRIVATE KEY-----")
		return b.String()
	}},
	{"slack-bot-token", func(g *gen) string {
		return fmt.Sprintf("var slack=\"xoxb-%s-%s-%s\"", g.rnd("0123456789", 12), g.rnd("0123456789", 13), g.rnd(alnum, 24))
	}},
	{"generic-api-key", func(g *gen) string { return "const api_key = \"" + g.rnd(alnum, 32) + "\"" }},
}

const license = `MIT License

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files, to deal in the Software
without restriction. THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY
KIND.
`

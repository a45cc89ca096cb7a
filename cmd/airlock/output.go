package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"text/tabwriter"
	"text/template"
	"text/template/parse"

	"github.com/airlock/airlock/engine/client"
	"github.com/spf13/cobra"
)

// output is how a listing prints, the same on every listing: a table by
// default, JSON with --json, or a Go template per item with --format, as
// Docker's CLI does ('{{.ID}} {{.State}}', 'table {{.ID}}\t{{.State}}',
// '{{json .}}', 'json').
type output struct {
	json   bool
	format string
	// lines makes --json print one value per line (JSON lines) instead of
	// one array: the shape the command had before --format existed.
	lines bool
}

// addOutputFlags adds --json and --format to cmd; what names the items.
// The flags are checked before the command runs, so a bad template fails
// before anything is asked of the engine.
func addOutputFlags(cmd *cobra.Command, what string) *output {
	o := &output{}
	cmd.Flags().BoolVar(&o.json, "json", false, "print "+what+" as JSON")
	cmd.Flags().StringVar(&o.format, "format", "", "print "+what+" with a Go template: '{{.ID}}', 'table {{.ID}}\\t{{.State}}', '{{json .}}' or 'json'")
	prev := cmd.PreRunE
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		if err := o.check(); err != nil {
			return err
		}
		if prev != nil {
			return prev(cmd, args)
		}
		return nil
	}
	return o
}

// custom reports whether the flags replace the command's own text.
func (o *output) custom() bool {
	f := strings.TrimSpace(o.format)
	return o.json || (f != "" && f != "table")
}

// printOne prints v: as JSON, through the template, or with human.
func printOne[T any](o *output, w io.Writer, v T, human func() error) error {
	if err := o.check(); err != nil {
		return err
	}
	if o.wantsJSON() {
		return writeJSON(w, v, !o.lines)
	}
	return printList(o, w, []T{v}, human)
}

// printList prints items: as a JSON array (JSON lines if o.lines), each
// through the template (a table when it starts with "table"), or with
// human when neither flag is given.
func printList[T any](o *output, w io.Writer, items []T, human func() error) error {
	if err := o.check(); err != nil {
		return err
	}
	if o.wantsJSON() {
		if o.lines {
			for _, it := range items {
				if err := writeJSON(w, it, false); err != nil {
					return err
				}
			}
			return nil
		}
		if items == nil {
			items = []T{}
		}
		return writeJSON(w, items, true)
	}
	if !o.custom() {
		return human()
	}
	text, table := o.template()
	tmpl, err := parseTemplate(text)
	if err != nil {
		return err
	}
	dst := w
	var tw *tabwriter.Writer
	if table {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		dst = tw
		if header := templateHeader(tmpl); header != "" {
			fmt.Fprintln(tw, header)
		}
	}
	for _, it := range items {
		var b bytes.Buffer
		if err := tmpl.Execute(&b, it); err != nil {
			return usageErr("--format: %v; the fields are: %s", err, strings.Join(fieldNames(it), ", "))
		}
		b.WriteByte('\n')
		if _, err := dst.Write(b.Bytes()); err != nil {
			return err
		}
	}
	if tw != nil {
		return tw.Flush()
	}
	return nil
}

// check refuses flags that contradict each other and templates that do
// not parse, before anything prints.
func (o *output) check() error {
	if o.json && strings.TrimSpace(o.format) != "" {
		return usageErr("give --json or --format, not both")
	}
	if o.custom() && !o.wantsJSON() {
		text, _ := o.template()
		_, err := parseTemplate(text)
		return err
	}
	return nil
}

func (o *output) wantsJSON() bool {
	return o.json || strings.TrimSpace(o.format) == "json"
}

// template returns the format's template text with the shell-friendly
// escapes \t and \n made real, and whether it asked for a table.
func (o *output) template() (string, bool) {
	f := strings.NewReplacer(`\t`, "\t", `\n`, "\n").Replace(o.format)
	if rest, ok := strings.CutPrefix(f, "table"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
		return strings.TrimLeft(rest, " "), true
	}
	return f, false
}

// templateFuncs are the functions a --format template can call.
var templateFuncs = template.FuncMap{
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
	"join":  strings.Join,
	"upper": strings.ToUpper,
	"lower": strings.ToLower,
	"truncate": func(s string, n int) string {
		if n >= 0 && len(s) > n {
			return s[:n]
		}
		return s
	},
}

func parseTemplate(text string) (*template.Template, error) {
	t, err := template.New("format").Funcs(templateFuncs).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, usageErr("--format: %v (a Go template, e.g. '{{.ID}} {{.State}}')", err)
	}
	return t, nil
}

// templateHeader is a table's header: the template with every plain
// field action ({{.ID}}, {{.Limits.CPUs}}) replaced by the field's name in
// capitals. A template with other actions at its top level has none.
func templateHeader(t *template.Template) string {
	var b strings.Builder
	for _, n := range t.Tree.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			b.Write(n.Text)
		case *parse.ActionNode:
			name := actionField(n)
			if name == "" {
				return ""
			}
			b.WriteString(name)
		default:
			return ""
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// actionField names the field an action prints, or "" when it does more:
// {{.ID}} is "ID", {{json .Egress}} is "EGRESS".
func actionField(a *parse.ActionNode) string {
	if len(a.Pipe.Decl) > 0 || len(a.Pipe.Cmds) != 1 {
		return ""
	}
	args := a.Pipe.Cmds[0].Args
	last := args[len(args)-1]
	switch f := last.(type) {
	case *parse.FieldNode:
		return strings.ToUpper(strings.Join(f.Ident, "."))
	case *parse.DotNode:
		return "VALUE"
	}
	return ""
}

// fieldNames lists what a template can name on v, for an error message.
func fieldNames(v any) []string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return []string{"."}
	}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); f.IsExported() {
			names = append(names, "."+f.Name)
		}
	}
	return names
}

func writeJSON(w io.Writer, v any, indent bool) error {
	enc := json.NewEncoder(w)
	if indent {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(v)
}

// listRun is the RunE of a listing: connect, fetch the items for the
// command's arguments, and print them through *out (read when the command
// runs, after its flags were added): the human form unless --json or
// --format say otherwise.
func listRun[T any](g *globals, out **output, fetch func(ctx context.Context, c *client.Client, args []string) ([]T, error), human func(items []T) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		c, err := g.connect(ctx)
		if err != nil {
			return err
		}
		items, err := fetch(ctx, c, args)
		if err != nil {
			return err
		}
		return printList(*out, os.Stdout, items, func() error { return human(items) })
	}
}

// table prints header and the rows that rows writes, in aligned columns
// on standard output.
func table(header string, rows func(tw io.Writer)) error {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	rows(tw)
	return tw.Flush()
}

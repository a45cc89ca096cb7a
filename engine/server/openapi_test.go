package server

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/server/servertest"
	"gopkg.in/yaml.v3"
)

// specPath is the OpenAPI description of this API; the frontend's types
// are generated from it (frontend/src/api/schema.d.ts).
const specPath = "../../docs/openapi.yaml"

// wireTypes are the engine/api types the spec describes, by the name of
// their schema in components.schemas.
var wireTypes = []any{
	api.Limits{}, api.Session{}, api.Hibernation{}, api.HibernateRequest{}, api.Workspace{}, api.CreateRequest{}, api.Budgets{},
	api.Command{}, api.ExecRequest{}, api.RunRequest{}, api.ExecStarted{}, api.ExecExit{},
	api.Resize{}, api.Signal{}, api.Error{}, api.Image{}, api.ImageBuildRequest{},
	api.Progress{}, api.VersionInfo{}, api.AgentRequest{}, api.Turn{}, api.AgentLine{},
	api.Secret{}, api.SecretRequest{}, api.PortRequest{}, api.Port{}, api.ListeningPort{}, api.EgressPolicy{}, api.SavedPolicy{}, api.PolicyChange{}, api.EgressEntry{}, api.PendingQuestion{}, api.Decide{},
	api.LifecycleEvent{}, api.Meter{}, api.CPUSample{}, api.Snapshot{}, api.SnapshotLayer{},
	api.SnapshotRequest{}, api.RestoreRequest{}, api.Restored{}, api.Imported{}, api.Settings{},
	api.ReviewLimits{}, api.SessionEvent{}, api.Event{}, api.Usage{}, api.Diff{},
	api.FileDiff{}, api.Hunk{}, api.Conflict{}, api.Finding{}, api.Stat{},
	api.Commit{}, api.Selection{}, api.Outcomes{}, api.Outcome{},
	api.Ignored{}, api.IgnoredDir{}, api.IgnoredRule{}, api.IgnoredFinding{},
	api.Schedule{}, api.ScheduleRun{}, api.ScheduleRunRequest{},
	api.Checkpoint{}, api.UndoRequest{}, api.Undone{}, api.ForkRequest{}, api.Blame{}, api.HunkBlame{}, api.BlameCall{},
}

// notOnTheWire are engine/api's struct types that no JSON body carries,
// each with the reason.
var notOnTheWire = map[string]string{
	"FrameWriter":         "writes exec frames; it is code, not a message",
	"Change":              "embedded in FileDiff, whose schema has its fields",
	"CheckpointDiffQuery": "the query parameters of GET .../checkpoints/diff",
	"DiffQuery":           "the query parameters of GET .../diff",
}

// specExceptions are where the spec says less than reflection over the Go
// type would, each with the reason. The function edits the reflected
// schema into what the spec must say.
var specExceptions = map[string]struct {
	reason string
	edit   func(schema map[string]any)
}{
	"Diff": {"GET .../diff streams files (or, with stat=1, stats), never both: neither is always there",
		func(s map[string]any) { s["required"] = without(s["required"].([]any), "files", "stats") }},
}

func without(list []any, drop ...string) []any {
	return slices.DeleteFunc(slices.Clone(list), func(v any) bool { return slices.Contains(drop, v.(string)) })
}

// TestOpenAPIRoutes: the spec documents every route server.go serves and
// no other, each route's path parameters, and the status and content
// type each answers in routeCases.
func TestOpenAPIRoutes(t *testing.T) {
	spec := loadSpec(t)
	paths, _ := spec["paths"].(map[string]any)
	documented := map[string]map[string]any{}
	for path, item := range paths {
		for method, op := range item.(map[string]any) {
			if method == "parameters" {
				continue
			}
			documented[strings.ToUpper(method)+" "+path] = op.(map[string]any)
			checkPathParams(t, spec, path, method, item.(map[string]any), op.(map[string]any))
		}
	}
	served := servedRoutes(t)
	for _, r := range served {
		if documented[r] == nil {
			t.Errorf("%s is served but not in %s", r, specPath)
		}
	}
	for r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("%s is in %s but server.go serves no such route", r, specPath)
		}
	}
	for _, rc := range routeCases {
		if rc.status >= 300 {
			continue // a route the fake cannot answer (exec, run, terminal, export): its table row says why
		}
		key := rc.method + " " + routeTemplate(rc.path)
		op := documented[key]
		if op == nil {
			continue // reported above
		}
		resp, _ := op["responses"].(map[string]any)[strconv.Itoa(rc.status)].(map[string]any)
		if resp == nil {
			t.Errorf("%s: %s documents no %d response", key, specPath, rc.status)
			continue
		}
		content, _ := resp["content"].(map[string]any)
		switch {
		case rc.contentType == "" && len(content) > 0:
			t.Errorf("%s: documented with a body, answers none", key)
		case rc.contentType != "" && content[rc.contentType] == nil:
			t.Errorf("%s: answers %s, documented as %v", key, rc.contentType, slices.Sorted(maps.Keys(content)))
		}
	}
}

// routeTemplate turns a routeCases path back into server.go's pattern.
func routeTemplate(path string) string {
	return strings.NewReplacer("/s1", "/{id}", "/snap1", "/{ref}", "/KEY", "/{name}").Replace(path)
}

// checkPathParams: every {name} in path is a documented path parameter.
func checkPathParams(t *testing.T, spec map[string]any, path, method string, item, op map[string]any) {
	t.Helper()
	have := map[string]bool{}
	for _, list := range []any{item["parameters"], op["parameters"]} {
		ps, _ := list.([]any)
		for _, p := range ps {
			p := resolve(spec, p.(map[string]any))
			if p["in"] == "path" {
				have[p["name"].(string)] = true
			}
		}
	}
	for _, m := range regexp.MustCompile(`\{(\w+)\}`).FindAllStringSubmatch(path, -1) {
		if !have[m[1]] {
			t.Errorf("%s %s: path parameter %s is not documented", strings.ToUpper(method), path, m[1])
		}
	}
}

// servedRoutes reads the routes server.go registers, as "METHOD /v1/path".
func servedRoutes(t *testing.T) []string {
	src, err := os.ReadFile("server.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`HandleFunc\("(\w+) "\+p\+"([^"]+)"`).FindAllStringSubmatch(string(src), -1) {
		out = append(out, m[1]+" /"+api.Version+m[2])
	}
	if len(out) == 0 {
		t.Fatal("found no routes in server.go: has the way it registers them changed?")
	}
	return out
}

// TestOpenAPISchemas: each schema in the spec is what encoding/json makes
// of its engine/api type (field names, types, and as required the fields
// without omitempty, which are always written), and every struct type of
// engine/api is in the spec or says why not.
func TestOpenAPISchemas(t *testing.T) {
	spec := loadSpec(t)
	schemas, _ := spec["components"].(map[string]any)["schemas"].(map[string]any)
	want := map[string]bool{}
	for _, v := range wireTypes {
		typ := reflect.TypeOf(v)
		want[typ.Name()] = true
		expect := schemaOf(typ)
		if ex, ok := specExceptions[typ.Name()]; ok {
			ex.edit(expect)
		}
		got, ok := schemas[typ.Name()]
		if !ok {
			t.Errorf("%s: no schema %s; it should be:\n%s", specPath, typ.Name(), toYAML(expect))
			continue
		}
		if g := comparable(got); !reflect.DeepEqual(g, comparable(expect)) {
			t.Errorf("%s: schema %s is not api.%s; the type makes:\n%s\nthe spec has:\n%s",
				specPath, typ.Name(), typ.Name(), toYAML(expect), toYAML(g))
		}
	}
	for name := range schemas {
		if !want[name] {
			t.Errorf("%s: schema %s is no engine/api type in wireTypes", specPath, name)
		}
	}
	for _, name := range apiStructs(t) {
		if !want[name] && notOnTheWire[name] == "" {
			t.Errorf("engine/api has struct %s: add it to wireTypes (and %s), or to notOnTheWire with why", name, specPath)
		}
	}
	checkRefs(t, spec, spec)
}

// checkRefs: every $ref in v names something the spec has.
func checkRefs(t *testing.T, spec map[string]any, v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if ref, ok := x.(string); ok && k == "$ref" && resolve(spec, v) == nil {
				t.Errorf("%s: $ref %s names nothing in it", specPath, ref)
			}
			checkRefs(t, spec, x)
		}
	case []any:
		for _, x := range v {
			checkRefs(t, spec, x)
		}
	}
}

// resolve follows node's local $ref, if it has one; nil if it leads nowhere.
func resolve(spec map[string]any, node map[string]any) map[string]any {
	ref, ok := node["$ref"].(string)
	if !ok {
		return node
	}
	var at any = spec
	for _, k := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		m, _ := at.(map[string]any)
		at = m[k]
	}
	m, _ := at.(map[string]any)
	return m
}

// apiStructs names the struct types engine/api declares.
func apiStructs(t *testing.T) []string {
	var out []string
	_, files := parseGo(t, "../api/*.go")
	for _, file := range files {
		ast.Inspect(file, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.IsExported() {
				if _, ok := ts.Type.(*ast.StructType); ok {
					out = append(out, ts.Name.Name)
				}
			}
			return true
		})
	}
	return out
}

// parseGo parses the Go files pattern matches, but tests.
func parseGo(t *testing.T, pattern string) (*token.FileSet, []*ast.File) {
	t.Helper()
	names, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
	}
	return fset, files
}

func loadSpec(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := yaml.Unmarshal(b, &spec); err != nil {
		t.Fatalf("%s: %v", specPath, err)
	}
	if v, _ := spec["openapi"].(string); !strings.HasPrefix(v, "3.") {
		t.Fatalf("%s: openapi %q, want 3.x", specPath, v)
	}
	return spec
}

var (
	timeType = reflect.TypeOf(time.Time{})
	rawType  = reflect.TypeOf(json.RawMessage{})
)

// schemaOf is the OpenAPI schema encoding/json's encoding of a struct
// type has: its JSON fields (embedded structs' fields flattened), each
// required unless omitempty can leave it out.
func schemaOf(typ reflect.Type) map[string]any {
	props := map[string]any{}
	var required []any
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			tag := f.Tag.Get("json")
			if f.Anonymous && tag == "" {
				walk(f.Type)
				continue
			}
			if !f.IsExported() || tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if name == "" {
				name = f.Name
			}
			props[name] = fieldSchema(f.Type)
			// omitempty leaves out empty values; a struct is never empty.
			if !slices.Contains(strings.Split(opts, ","), "omitempty") || f.Type.Kind() == reflect.Struct {
				required = append(required, name)
			}
		}
	}
	walk(typ)
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		sort.Slice(required, func(i, j int) bool { return required[i].(string) < required[j].(string) })
		s["required"] = required
	}
	return s
}

// fieldSchema is the schema of a field's value: a named struct is a $ref
// to its own schema.
func fieldSchema(typ reflect.Type) map[string]any {
	switch {
	case typ == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case typ == rawType:
		return map[string]any{} // any JSON value
	case typ.Kind() == reflect.Pointer:
		return fieldSchema(typ.Elem())
	case typ.Kind() == reflect.Struct:
		return map[string]any{"$ref": "#/components/schemas/" + typ.Name()}
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.Uint8:
		return map[string]any{"type": "string", "format": "byte"}
	case typ.Kind() == reflect.Slice:
		return map[string]any{"type": "array", "items": fieldSchema(typ.Elem())}
	case typ.Kind() == reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": fieldSchema(typ.Elem())}
	case typ.Kind() == reflect.String:
		return map[string]any{"type": "string"}
	case typ.Kind() == reflect.Bool:
		return map[string]any{"type": "boolean"}
	case typ.Kind() == reflect.Float32 || typ.Kind() == reflect.Float64:
		return map[string]any{"type": "number"}
	case typ.Kind() >= reflect.Int && typ.Kind() <= reflect.Uint64:
		return map[string]any{"type": "integer"}
	}
	panic(fmt.Sprintf("no schema for Go type %s: teach fieldSchema", typ))
}

// comparable is a schema as the Go type can say it: without the words
// (description, enum, examples) that only the spec has, and with its
// required list sorted.
func comparable(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			switch k {
			case "description", "enum", "example", "examples", "title":
				continue
			case "required":
				list := slices.Clone(x.([]any))
				sort.Slice(list, func(i, j int) bool { return list[i].(string) < list[j].(string) })
				out[k] = list
				continue
			}
			out[k] = comparable(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = comparable(x)
		}
		return out
	}
	return v
}

func toYAML(v any) string {
	b, _ := yaml.Marshal(v)
	return string(b)
}

// TestOpenAPIBodies: each route's documented JSON request body and JSON
// answer are the engine/api types its handler decodes and answers, as
// server.go and the handlers' signatures say: for serve(STATUS, s.call),
// call's request and answer types; for a handler of its own, the type of
// its `var req api.T`.
func TestOpenAPIBodies(t *testing.T) {
	spec := loadSpec(t)
	handlers := handlerTypes(t)
	src, err := os.ReadFile("server.go")
	if err != nil {
		t.Fatal(err)
	}
	route := regexp.MustCompile(`HandleFunc\("(\w+) "\+p\+"([^"]+)",.*?s\.(\w+)\)*$`)
	checked := 0
	for _, line := range strings.Split(string(src), "\n") {
		m := route.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		method, path, name := m[1], "/"+api.Version+m[2], m[3]
		h, ok := handlers[name]
		if !ok {
			t.Errorf("%s %s: no handler %s found", method, path, name)
			continue
		}
		op, _ := spec["paths"].(map[string]any)[path].(map[string]any)[strings.ToLower(method)].(map[string]any)
		if op == nil {
			continue // TestOpenAPIRoutes reports it
		}
		var body any
		if rb, _ := op["requestBody"].(map[string]any); rb != nil {
			body = jsonSchema(spec, rb)
		}
		if want, ok := wireSchema(h.req); ok && !reflect.DeepEqual(comparable(body), comparable(want)) {
			t.Errorf("%s %s: %s reads %s; %s documents the body %v", method, path, name, h.req, specPath, body)
		}
		if h.resp == "" {
			continue // a stream: its answer is checked by TestOpenAPIRoutes's content type
		}
		var answer any
		for code, r := range op["responses"].(map[string]any) {
			if strings.HasPrefix(code, "2") {
				answer = jsonSchema(spec, r.(map[string]any))
			}
		}
		if want, ok := wireSchema(h.resp); ok && !reflect.DeepEqual(comparable(answer), comparable(want)) {
			t.Errorf("%s %s: %s answers %s; %s documents %v", method, path, name, h.resp, specPath, answer)
		}
		checked++
	}
	if checked < 20 {
		t.Errorf("checked the bodies of %d routes only: has the way server.go registers them changed?", checked)
	}
}

// jsonSchema is the application/json schema of a request body or an
// answer; nil when it has none.
func jsonSchema(spec map[string]any, node map[string]any) any {
	content, _ := resolve(spec, node)["content"].(map[string]any)
	mt, _ := content["application/json"].(map[string]any)
	if mt == nil {
		return nil
	}
	return mt["schema"]
}

// wireSchema is the schema the spec must give a handler's Go type
// expression: api.T, []api.T, or none (no body). ok is false for others
// (an inline map), which the spec describes in its own words.
func wireSchema(expr string) (schema any, ok bool) {
	ref := func(name string) map[string]any {
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	switch {
	case expr == "none":
		return nil, true
	case strings.HasPrefix(expr, "[]api."):
		return map[string]any{"type": "array", "items": ref(strings.TrimPrefix(expr, "[]api."))}, true
	case strings.HasPrefix(expr, "api."):
		return ref(strings.TrimPrefix(expr, "api.")), true
	}
	return nil, false
}

// A handler's request and answer types, as Go source.
type handlerType struct{ req, resp string }

// handlerTypes reads the package's handlers: a serve call's request and
// answer types from its signature; a handler of its own's request type
// from its `var req T` ("none" without one) and no answer type.
func handlerTypes(t *testing.T) map[string]handlerType {
	fset, files := parseGo(t, "*.go")
	expr := func(e ast.Expr) string {
		var b strings.Builder
		if err := format.Node(&b, fset, e); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	out := map[string]handlerType{}
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Body == nil {
				continue
			}
			params, results := fn.Type.Params.List, fn.Type.Results
			if len(params) == 2 && results != nil && len(results.List) == 2 && expr(params[0].Type) == "*http.Request" {
				out[fn.Name.Name] = handlerType{req: expr(params[1].Type), resp: expr(results.List[0].Type)}
				continue
			}
			if len(params) == 2 && expr(params[0].Type) == "http.ResponseWriter" {
				h := handlerType{req: "none"}
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && vs.Names[0].Name == "req" && vs.Type != nil {
						h.req = expr(vs.Type)
					}
					return true
				})
				out[fn.Name.Name] = h
			}
		}
	}
	return out
}

// TestOpenAPIErrorClasses: the spec's error classes are the engine's, and
// it gives each the status Status gives it.
func TestOpenAPIErrorClasses(t *testing.T) {
	spec := loadSpec(t)
	components := spec["components"].(map[string]any)
	errSchema := components["schemas"].(map[string]any)["Error"].(map[string]any)
	enum := errSchema["properties"].(map[string]any)["class"].(map[string]any)["enum"]
	var want []any
	for _, c := range servertest.Classes {
		want = append(want, string(c))
	}
	if !reflect.DeepEqual(sortedStrings(enum), sortedStrings(want)) {
		t.Errorf("%s: Error.class enum %v, the engine's classes are %v", specPath, enum, want)
	}
	words := strings.Join(strings.Fields(components["responses"].(map[string]any)["Error"].(map[string]any)["description"].(string)), " ")
	for _, c := range servertest.Classes {
		if pair := fmt.Sprintf("%s %d", c, Status(c)); !strings.Contains(words, pair) {
			t.Errorf("%s: the Error response does not say %q", specPath, pair)
		}
	}
	types := components["schemas"].(map[string]any)["SessionEvent"].(map[string]any)["properties"].(map[string]any)["type"].(map[string]any)["enum"]
	if want := []any{string(api.SessionsListed), string(api.SessionChanged), string(api.SessionRemoved)}; !reflect.DeepEqual(sortedStrings(types), sortedStrings(want)) {
		t.Errorf("%s: SessionEvent.type enum %v, want %v", specPath, types, want)
	}
}

func sortedStrings(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, x := range list {
		out = append(out, fmt.Sprint(x))
	}
	sort.Strings(out)
	return out
}

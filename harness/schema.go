package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Schema is a JSON Schema an agent's final answer must match.
type Schema struct {
	raw      json.RawMessage
	resolved *jsonschema.Resolved
}

// CompileSchema parses a JSON Schema (draft 2020-12 or draft-07; 2020-12
// when it names none).
func CompileSchema(raw []byte) (*Schema, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("the schema does not parse: %v", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("the schema does not compile: %v", err)
	}
	var compact bytes.Buffer
	json.Compact(&compact, raw)
	return &Schema{raw: compact.Bytes(), resolved: rs}, nil
}

// Instructions is what a prompt gets appended so that the agent ends
// with a JSON answer.
func (s *Schema) Instructions() string {
	return "\n\nWhen you are done, end your reply with your final answer as a single JSON value that matches this JSON Schema, " +
		"in a ```json code block, with nothing after it:\n" + string(s.raw)
}

// Retry is the prompt of the one retry turn after an answer that did not
// match.
func (s *Schema) Retry(problem error) string {
	return "Your final answer did not match the required JSON Schema: " + problem.Error() +
		"\nReply with only the corrected JSON value, in a ```json code block. The schema:\n" + string(s.raw)
}

var fenceRE = regexp.MustCompile("(?s)```(?:json|JSON)?[ \t]*\n(.*?)```")

// Check finds the JSON value in an answer (the whole answer, its last
// fenced block, or its outermost braces) and validates it.
func (s *Schema) Check(answer string) (json.RawMessage, error) {
	var candidates []string
	candidates = append(candidates, strings.TrimSpace(answer))
	if m := fenceRE.FindAllStringSubmatch(answer, -1); m != nil {
		candidates = append(candidates, strings.TrimSpace(m[len(m)-1][1]))
	}
	for _, pair := range [][2]string{{"{", "}"}, {"[", "]"}} {
		if i, j := strings.Index(answer, pair[0]), strings.LastIndex(answer, pair[1]); i >= 0 && j > i {
			candidates = append(candidates, answer[i:j+1])
		}
	}
	var firstErr error
	for _, c := range candidates {
		var v any
		if json.Unmarshal([]byte(c), &v) != nil {
			continue
		}
		if err := s.resolved.Validate(v); err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("%s", strings.Join(strings.Fields(err.Error()), " "))
			}
			continue
		}
		var b bytes.Buffer
		json.Compact(&b, []byte(c))
		return b.Bytes(), nil
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return nil, fmt.Errorf("the answer holds no JSON value")
}

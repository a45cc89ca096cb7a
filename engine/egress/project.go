package egress

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"gopkg.in/yaml.v3"
)

// A project keeps the egress policy its sessions start from in the
// `egress:` section of its .airlock/policy.yaml (the accept policy's
// file, read on the host side only), so that it is reviewed and
// committed with the code:
//
//	egress:
//	  mode: ask
//	  allow: [api.github.com, "GET api.github.com/repos/**"]
//	  deny: ["POST api.github.com/**"]
//	  inspect: [api.github.com]
//	  inject: ["api.example.com:x-api-key=secret:API_KEY"]
//	  private: false
//	  ask_timeout: 2m
//
// The other sections are the review's; these functions leave them as
// they are.

// ProjectSection is the key of the egress section.
const ProjectSection = "egress"

// projectPolicy is the section as written: unknown keys are refused.
type projectPolicy struct {
	Mode       string   `yaml:"mode"`
	Allow      []string `yaml:"allow,omitempty"`
	Deny       []string `yaml:"deny,omitempty"`
	Private    bool     `yaml:"private,omitempty"`
	Inject     []string `yaml:"inject,omitempty"`
	Inspect    []string `yaml:"inspect,omitempty"`
	AskTimeout string   `yaml:"ask_timeout,omitempty"`
}

// ReadProject reads the egress section of a project policy file's
// contents: nil when it has none. The spec is checked as Compile checks
// it.
func ReadProject(data []byte) (*Spec, error) {
	var doc map[string]yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	node, ok := doc[ProjectSection]
	if !ok {
		return nil, nil
	}
	// Decode the section again on its own, strictly: a misspelt key
	// must not quietly loosen or tighten what the project meant.
	b, err := yaml.Marshal(&node)
	if err != nil {
		return nil, err
	}
	var pp projectPolicy
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&pp); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("section egress: %v (fields: mode, allow, deny, private, inject, inspect, ask_timeout)", err)
	}
	s := &Spec{Mode: pp.Mode, Allow: pp.Allow, Deny: pp.Deny, Private: pp.Private, Inject: pp.Inject, Inspect: pp.Inspect}
	if s.Mode == "" {
		s.Mode = Custom
	}
	if pp.AskTimeout != "" {
		if s.AskTimeout, err = time.ParseDuration(pp.AskTimeout); err != nil || s.AskTimeout <= 0 {
			return nil, fmt.Errorf("section egress: ask_timeout %q: write a duration like 60s or 5m", pp.AskTimeout)
		}
	}
	if _, err := Compile(*s); err != nil {
		return nil, fmt.Errorf("section egress: %v", err)
	}
	return s, nil
}

// WriteProject returns a project policy file's contents (data, which
// may be empty) with its egress section set to s. The file's other
// sections, and the comments on them, stay as they were.
func WriteProject(data []byte, s Spec) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind == 0 { // empty file
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("the file is not a YAML mapping (auto_accept:, hold:, ...): fix it first")
	}
	pp := projectPolicy{Mode: s.Mode, Allow: s.Allow, Deny: s.Deny, Private: s.Private, Inject: s.Inject, Inspect: s.Inspect}
	if s.AskTimeout > 0 {
		pp.AskTimeout = s.AskTimeout.String()
	}
	var section yaml.Node
	if err := section.Encode(pp); err != nil {
		return nil, err
	}
	m := doc.Content[0]
	replaced := false
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == ProjectSection {
			m.Content[i+1] = &section
			replaced = true
		}
	}
	if !replaced {
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: ProjectSection,
			HeadComment: "The network policy sessions of this project start from (airlock policy save)."}, &section)
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	enc.Close()
	return out.Bytes(), nil
}

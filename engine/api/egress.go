package api

import (
	"time"
)

// Secret is a stored secret's name (values never leave the engine).
type Secret struct {
	Name    string    `json:"name"`
	Updated time.Time `json:"updated"`
}

// SecretRequest sets a secret.
type SecretRequest struct {
	Value string `json:"value"`
}

// EgressPolicy is a session's network policy. Mode is allow-all, deny-all
// or custom; rules are domains (example.com), wildcards (*.example.com)
// or CIDRs (198.51.100.0/24), each with an optional :PORT. Deny beats
// allow. Private, loopback, link-local and metadata addresses stay
// blocked unless Private is set (and, for metadata, a rule names it).
type EgressPolicy struct {
	Mode    string   `json:"mode"`
	Allow   []string `json:"allow,omitempty"`
	Deny    []string `json:"deny,omitempty"`
	Private bool     `json:"private,omitempty"`
	// Inject adds headers holding secrets to a host's requests in
	// transit: "api.example.com:x-api-key=secret:NAME".
	Inject []string `json:"inject,omitempty"`
	// Inspect names hosts whose TLS the proxy ends with the engine's CA,
	// so that request rules ("GET api.example.com/v1/**": a method and
	// a path glob) apply to their HTTPS requests.
	Inspect []string `json:"inspect,omitempty"`
	// AskTimeout is how long the ask mode holds a question before it is
	// a deny (0: 60 s; at most an hour).
	AskTimeout time.Duration `json:"ask_timeout,omitempty"`
}

// PolicyChange edits a running session's policy: rules to add to each
// list, or a whole new policy.
type PolicyChange struct {
	Set     *EgressPolicy `json:"set,omitempty"`
	Allow   []string      `json:"allow,omitempty"`
	Deny    []string      `json:"deny,omitempty"`
	Inject  []string      `json:"inject,omitempty"`
	Inspect []string      `json:"inspect,omitempty"`
	Mode    string        `json:"mode,omitempty"`
	Private *bool         `json:"private,omitempty"`
	// AskTimeout, when set, replaces the ask mode's timeout.
	AskTimeout time.Duration `json:"ask_timeout,omitempty"`
	// FromLog allows what log entry FromLog was about.
	FromLog int64 `json:"from_log,omitempty"`
}

// SavedPolicy is what `airlock policy save` wrote: a session's policy,
// in the egress section of its project's policy file.
type SavedPolicy struct {
	File   string       `json:"file"`
	Policy EgressPolicy `json:"policy"`
}

// EgressEntry is one connection (or DNS lookup) of a session.
type EgressEntry struct {
	ID       int64         `json:"id"`
	Time     time.Time     `json:"time"`
	Kind     string        `json:"kind"` // http, connect, tcp, dns
	Host     string        `json:"host"`
	Port     int           `json:"port,omitempty"`
	Method   string        `json:"method,omitempty"` // of a request the proxy read
	Path     string        `json:"path,omitempty"`   // cleaned as rules match it, no query
	Addr     string        `json:"addr,omitempty"`
	BytesOut int64         `json:"bytes_out"`
	BytesIn  int64         `json:"bytes_in"`
	Allowed  bool          `json:"allowed"`
	Rule     string        `json:"rule,omitempty"`
	Reason   string        `json:"reason,omitempty"`
	Duration time.Duration `json:"duration"`
}

// PendingQuestion is a connection or request of a session under the ask
// mode that no rule decided, held while the user is asked.
type PendingQuestion struct {
	ID      int64     `json:"id"`
	Session string    `json:"session"`
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"` // connect, http, https
	Host    string    `json:"host"`
	Port    int       `json:"port"`
	Method  string    `json:"method,omitempty"` // "" for a CONNECT whose requests the proxy does not read
	Path    string    `json:"path,omitempty"`
}

// Decide answers a pending question: allow-once, allow-always (adds the
// destination to the session's running policy) or deny.
type Decide struct {
	ID     int64  `json:"id"`
	Answer string `json:"answer"`
}

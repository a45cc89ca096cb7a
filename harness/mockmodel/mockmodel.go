// Package mockmodel is a scripted model server for tests and benchmarks:
// it speaks the Anthropic Messages API and the OpenAI Responses and Chat
// Completions APIs, streaming (SSE) as the agent CLIs ask, so that the
// real CLIs can run offline. Each request that offers tools takes the next
// scripted reply; requests without tools (titles, summaries) get a short
// text and leave the script alone. ServeTLS serves it over TLS with a
// certificate from a CA the caller makes, for an engine told to trust it.
package mockmodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Reply is one scripted model turn: a tool call, or text that ends the
// agent's turn.
type Reply struct {
	Text string
	// Tool names the tool to call; Input is its arguments (any JSON
	// value), or, with Custom, the raw input of a free-form tool (Codex's
	// apply_patch).
	Tool   string
	Input  any
	Custom bool
}

// Request is what the server saw of one request.
type Request struct {
	Time     time.Time
	Method   string
	Path     string
	API      string // anthropic, responses, chat
	Model    string
	Tools    []string
	Stream   bool
	Body     string
	APIKey   string // the credential the request carried
	Scripted bool   // it took a reply from the script
}

// Server is a mock model endpoint. The zero value is not usable: use New.
type Server struct {
	mu     sync.Mutex
	script []Reply
	reqs   []Request
	seq    int
	// A CLI that retries a request (after a timeout, a reset) sends the
	// same body again: it gets the same reply, and the script stays put.
	lastBody  string
	lastReply Reply
	// Fallback answers a tool-offering request once the script is used
	// up (default: a text saying so).
	Fallback Reply
}

// New returns a server that answers with the given replies in order.
func New(script ...Reply) *Server {
	return &Server{script: script, Fallback: Reply{Text: "The script has no more replies."}}
}

// Push adds replies to the script.
func (s *Server) Push(r ...Reply) {
	s.mu.Lock()
	s.script = append(s.script, r...)
	s.mu.Unlock()
}

// Requests returns what the server has seen.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Pending is how many scripted replies are left.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script)
}

func (s *Server) next(req *Request) Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	if len(req.Tools) == 0 {
		s.reqs = append(s.reqs, *req)
		return Reply{Text: "Airlock session"}
	}
	req.Scripted = true
	s.reqs = append(s.reqs, *req)
	if req.Body == s.lastBody {
		return s.lastReply
	}
	r := s.Fallback
	if len(s.script) > 0 {
		r = s.script[0]
		s.script = s.script[1:]
	}
	s.lastBody, s.lastReply = req.Body, r
	return r
}

func (s *Server) id(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return fmt.Sprintf("%s_%d", prefix, s.seq)
}

// ServeHTTP answers the three APIs; anything else is a 404 (a HEAD or GET
// of / is a 200, as CLIs probe it).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	var in struct {
		Model  string            `json:"model"`
		Stream bool              `json:"stream"`
		Tools  []json.RawMessage `json:"tools"`
	}
	json.Unmarshal(body, &in)
	req := Request{Time: time.Now(), Method: r.Method, Path: r.URL.Path, Model: in.Model, Stream: in.Stream, Body: string(body),
		APIKey: firstNonEmpty(r.Header.Get("x-api-key"), strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))}
	for _, t := range in.Tools {
		var tool struct {
			Name     string `json:"name"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		json.Unmarshal(t, &tool)
		req.Tools = append(req.Tools, firstNonEmpty(tool.Name, tool.Function.Name))
	}
	path := r.URL.Path
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/messages/count_tokens"):
		writeJSON(w, map[string]any{"input_tokens": 100})
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/messages"):
		req.API = "anthropic"
		s.anthropic(w, in.Stream, s.next(&req))
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/responses"):
		req.API = "responses"
		s.responses(w, in.Model, s.next(&req))
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/chat/completions"):
		req.API = "chat"
		s.chat(w, in.Model, in.Stream, s.next(&req))
	case strings.HasSuffix(path, "/models"):
		writeJSON(w, map[string]any{"object": "list", "data": []any{}})
	case path == "/" && (r.Method == http.MethodHead || r.Method == http.MethodGet):
		s.record(req)
		w.WriteHeader(http.StatusOK)
	default:
		s.record(req)
		http.Error(w, `{"error":{"type":"not_found","message":"the mock model server does not serve this"}}`, http.StatusNotFound)
	}
}

func (s *Server) record(req Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// sse writes server-sent events and flushes each.
type sse struct {
	w http.ResponseWriter
}

func newSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return sse{w}
}

func (e sse) event(name string, v any) {
	b, _ := json.Marshal(v)
	if name != "" {
		fmt.Fprintf(e.w, "event: %s\n", name)
	}
	fmt.Fprintf(e.w, "data: %s\n\n", b)
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

func inputJSON(r Reply) string {
	if s, ok := r.Input.(string); ok && r.Custom {
		return s
	}
	if r.Input == nil {
		return "{}"
	}
	b, _ := json.Marshal(r.Input)
	return string(b)
}

const (
	inTokens  = 120
	outTokens = 30
)

func (s *Server) anthropic(w http.ResponseWriter, stream bool, r Reply) {
	msgID := s.id("msg")
	var block map[string]any
	stop := "end_turn"
	if r.Tool != "" {
		stop = "tool_use"
		var input any
		json.Unmarshal([]byte(inputJSON(r)), &input)
		block = map[string]any{"type": "tool_use", "id": s.id("toolu"), "name": r.Tool, "input": input}
	} else {
		block = map[string]any{"type": "text", "text": r.Text}
	}
	usage := map[string]any{"input_tokens": inTokens, "output_tokens": outTokens, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	if !stream {
		writeJSON(w, map[string]any{"id": msgID, "type": "message", "role": "assistant", "model": "mock",
			"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	e := newSSE(w)
	e.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": "mock", "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": inTokens, "output_tokens": 1}}})
	if r.Tool != "" {
		start := map[string]any{"type": "tool_use", "id": block["id"], "name": r.Tool, "input": map[string]any{}}
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": start})
		e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": inputJSON(r)}})
	} else {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": r.Text}})
	}
	e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	e.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": outTokens}})
	e.event("message_stop", map[string]any{"type": "message_stop"})
}

func (s *Server) responses(w http.ResponseWriter, model string, r Reply) {
	respID := s.id("resp")
	var item map[string]any
	if r.Tool != "" {
		callID := s.id("call")
		if r.Custom {
			item = map[string]any{"type": "custom_tool_call", "id": s.id("ctc"), "call_id": callID, "name": r.Tool, "input": inputJSON(r), "status": "completed"}
		} else {
			item = map[string]any{"type": "function_call", "id": s.id("fc"), "call_id": callID, "name": r.Tool, "arguments": inputJSON(r), "status": "completed"}
		}
	} else {
		item = map[string]any{"type": "message", "id": s.id("msg"), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": r.Text, "annotations": []any{}}}}
	}
	resp := func(status string, output []any) map[string]any {
		m := map[string]any{"id": respID, "object": "response", "created_at": time.Now().Unix(), "status": status, "model": model, "output": output}
		if status == "completed" {
			m["usage"] = map[string]any{"input_tokens": inTokens, "input_tokens_details": map[string]any{"cached_tokens": 0},
				"output_tokens": outTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": inTokens + outTokens}
		}
		return m
	}
	e := newSSE(w)
	seq := 0
	ev := func(typ string, v map[string]any) {
		v["type"], v["sequence_number"] = typ, seq
		seq++
		e.event(typ, v)
	}
	ev("response.created", map[string]any{"response": resp("in_progress", []any{})})
	ev("response.output_item.added", map[string]any{"output_index": 0, "item": item})
	if r.Tool == "" {
		ev("response.output_text.delta", map[string]any{"item_id": item["id"], "output_index": 0, "content_index": 0, "delta": r.Text})
	}
	ev("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	ev("response.completed", map[string]any{"response": resp("completed", []any{item})})
}

func (s *Server) chat(w http.ResponseWriter, model string, stream bool, r Reply) {
	id := s.id("chatcmpl")
	created := time.Now().Unix()
	finish := "stop"
	msg := map[string]any{"role": "assistant", "content": r.Text}
	if r.Tool != "" {
		finish = "tool_calls"
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"index": 0, "id": s.id("call"), "type": "function", "function": map[string]any{"name": r.Tool, "arguments": inputJSON(r)}}}}
	}
	usage := map[string]any{"prompt_tokens": inTokens, "completion_tokens": outTokens, "total_tokens": inTokens + outTokens}
	if !stream {
		writeJSON(w, map[string]any{"id": id, "object": "chat.completion", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	e := newSSE(w)
	chunk := func(delta map[string]any, finish any, usage any) {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		if usage != nil {
			c["usage"] = usage
		}
		e.event("", c)
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	if r.Tool != "" {
		chunk(map[string]any{"tool_calls": msg["tool_calls"]}, nil, nil)
	} else {
		chunk(map[string]any{"content": r.Text}, nil, nil)
	}
	chunk(map[string]any{}, finish, usage)
	fmt.Fprint(w, "data: [DONE]\n\n")
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

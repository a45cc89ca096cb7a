package mockmodel

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func post(t *testing.T, url, body string) string {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// Each API streams the scripted reply; a retried request gets the same
// reply without using up the script; a request without tools (a title)
// leaves the script alone.
func TestScript(t *testing.T) {
	m := New(Reply{Tool: "Bash", Input: map[string]any{"command": "ls"}}, Reply{Text: "done"})
	srv := httptest.NewServer(m)
	defer srv.Close()
	withTools := `{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[1]}`
	if got := post(t, srv.URL+"/v1/messages", `{"model":"m","stream":true}`); !strings.Contains(got, "Airlock session") {
		t.Fatalf("a request without tools: %q", got)
	}
	first := post(t, srv.URL+"/v1/messages", withTools)
	if !strings.Contains(first, `"name":"Bash"`) || !strings.Contains(first, "input_json_delta") || !strings.Contains(first, "message_stop") {
		t.Fatalf("tool call: %q", first)
	}
	if again := post(t, srv.URL+"/v1/messages", withTools); again == "" || !strings.Contains(again, `"name":"Bash"`) {
		t.Fatalf("a retry got %q", again)
	}
	if m.Pending() != 1 {
		t.Fatalf("the retry used up the script: %d left", m.Pending())
	}
	resp := post(t, srv.URL+"/v1/responses", `{"model":"m","stream":true,"tools":[{"type":"function","name":"x"}],"input":[2]}`)
	if !strings.Contains(resp, "response.completed") || !strings.Contains(resp, "done") {
		t.Fatalf("responses: %q", resp)
	}
	chat := post(t, srv.URL+"/v1/chat/completions", `{"model":"m","stream":true,"tools":[{"type":"function","function":{"name":"bash"}}],"messages":[3]}`)
	if !strings.Contains(chat, "[DONE]") || !strings.Contains(chat, "finish_reason") {
		t.Fatalf("chat: %q", chat)
	}
}

// Over TLS, a client that trusts the CA's PEM gets the scripted reply;
// one that does not is refused at the handshake.
func TestServeTLS(t *testing.T) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, base, err := New(Reply{Text: "over TLS"}).ServeTLS(l, ca)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if !strings.HasPrefix(base, "https://127.0.0.1:") {
		t.Fatalf("base URL %q", base)
	}
	body := `{"model":"m","tools":[{"name":"Bash"}],"messages":[1]}`
	var unknown x509.UnknownAuthorityError
	if _, err := http.Post(base+"/v1/messages", "application/json", strings.NewReader(body)); !errors.As(err, &unknown) {
		t.Fatalf("a client without the CA: %v; want an unknown authority", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.PEM()) {
		t.Fatalf("the CA's PEM holds no certificate: %q", ca.PEM())
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Post(base+"/v1/messages", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("a client trusting the CA: %v", err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); !strings.Contains(string(b), "over TLS") {
		t.Fatalf("reply over TLS: %q", b)
	}
}

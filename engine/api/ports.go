package api

// PortRequest forwards a port of a session to the host
// (POST /sessions/{id}/ports).
type PortRequest struct {
	// Port is the session's TCP port (1-65535).
	Port int `json:"port"`
	// Listen is the host address to listen on, host:port ("": a free
	// port of 127.0.0.1). Anything but loopback needs Auth.
	Listen string `json:"listen,omitempty"`
	// Auth is "" (none: plain TCP) or "bearer" (an HTTP front that wants
	// the token: an Authorization: Bearer header, or a cookie set by
	// visiting the URL with ?token=).
	Auth string `json:"auth,omitempty"`
}

// Port is a session port forwarded to the host.
type Port struct {
	Session string `json:"session"`
	Port    int    `json:"port"`
	// Listen is the address the engine listens on (the port chosen).
	Listen string `json:"listen"`
	// URL is where to open it (for an address of every interface, one
	// of the host's own).
	URL   string `json:"url"`
	Auth  string `json:"auth,omitempty"`
	Token string `json:"token,omitempty"`
}

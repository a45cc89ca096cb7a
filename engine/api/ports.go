package api

// PortRequest forwards a port of a session to the host
// (POST /sessions/{id}/ports).
type PortRequest struct {
	// Port is the session's TCP port (1-65535).
	Port int `json:"port"`
	// Listen is the host address to listen on, host:port ("": a free
	// port of 127.0.0.1). Anything but loopback needs Auth.
	Listen string `json:"listen,omitempty"`
	// Auth is "" (none: plain TCP), "bearer" (an HTTP front that wants
	// the token: an Authorization: Bearer header, or a cookie set by
	// visiting the URL with ?token=) or "basic" (an HTTP front that wants
	// HTTP basic auth: User and the password the engine makes).
	Auth string `json:"auth,omitempty"`
	// User is the basic auth user name ("": airlock); only with basic.
	User string `json:"user,omitempty"`
}

// Port is a session port forwarded to the host.
type Port struct {
	Session string `json:"session"`
	Port    int    `json:"port"`
	// Listen is the address the engine listens on (the port chosen).
	Listen string `json:"listen"`
	// URL is where to open it (for an address of every interface, one
	// of the host's own).
	URL  string `json:"url"`
	Auth string `json:"auth,omitempty"`
	// User is the basic auth user name.
	User string `json:"user,omitempty"`
	// Token is the bearer token, or the basic auth password.
	Token string `json:"token,omitempty"`
}

// ListeningPort is a TCP port a session listens on that is not forwarded
// (GET /sessions/{id}/ports/listening).
type ListeningPort struct {
	Port int `json:"port"`
	// Addresses are the session's addresses it is bound to (0.0.0.0 or ::
	// for all of them).
	Addresses []string `json:"addresses"`
}

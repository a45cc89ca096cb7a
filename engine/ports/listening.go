package ports

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"slices"
	"strconv"

	"github.com/airlock/airlock/confined"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

// maxTable bounds a read of /proc/PID/net/tcp (about 150 bytes a
// socket): the kernel writes it, but the session decides how many
// sockets it holds.
const maxTable = 8 << 20

// Listening returns the TCP ports the session listens on (IPv4 and
// IPv6, from its network namespace's tables in procfs) that are not
// forwarded, by port. It neither wakes the session nor counts as its use.
func (f *Forwarder) Listening(ctx context.Context, session string) ([]api.ListeningPort, error) {
	proc, err := f.sessions.Proc(ctx, session)
	if err != nil {
		return nil, err
	}
	root, err := confined.OpenRoot(proc)
	if err != nil {
		return nil, errdefs.Unavailablef("session %s's process is gone (its container stopped?): %v", session, err)
	}
	defer root.Close()
	byPort := map[int][]string{}
	for _, table := range []string{"net/tcp", "net/tcp6"} {
		b, err := root.ReadFile(table, maxTable)
		if errors.Is(err, fs.ErrNotExist) && table == "net/tcp6" {
			continue // IPv6 is off in the session's kernel
		}
		if errors.Is(err, confined.ErrTooLarge) {
			return nil, errdefs.Unavailablef("session %s holds too many sockets to list its listening ports (%s is over %d MiB)", session, table, maxTable>>20)
		}
		if err != nil {
			return nil, fmt.Errorf("read the session's %s: %w", table, err)
		}
		for _, l := range parseListening(b) {
			a := l.Addr().String()
			if !slices.Contains(byPort[int(l.Port())], a) {
				byPort[int(l.Port())] = append(byPort[int(l.Port())], a)
			}
		}
	}
	f.mu.Lock()
	for port := range byPort {
		if f.fwd[key(session, port)] != nil {
			delete(byPort, port)
		}
	}
	f.mu.Unlock()
	out := []api.ListeningPort{}
	for port, addrs := range byPort {
		slices.Sort(addrs)
		out = append(out, api.ListeningPort{Port: port, Addresses: addrs})
	}
	slices.SortFunc(out, func(a, b api.ListeningPort) int { return a.Port - b.Port })
	return out, nil
}

// tcpListen is the state of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// parseListening reads the listening sockets of a /proc/net/tcp or tcp6
// table: after a header line, one socket a line, whose fields are a slot
// number, the local address ADDR:PORT in hex, the remote one and the
// state. Lines that do not read so are skipped.
func parseListening(table []byte) []netip.AddrPort {
	var out []netip.AddrPort
	lines := bytes.Split(table, []byte("\n"))
	for _, line := range lines[min(1, len(lines)):] {
		f := bytes.Fields(line)
		if len(f) < 4 || string(f[3]) != tcpListen {
			continue
		}
		addr, port, ok := bytes.Cut(f[1], []byte(":"))
		if !ok || len(port) != 4 {
			continue
		}
		p, err := strconv.ParseUint(string(port), 16, 16)
		if err != nil || p == 0 {
			continue
		}
		ip, ok := procAddr(addr)
		if !ok {
			continue
		}
		out = append(out, netip.AddrPortFrom(ip, uint16(p)))
	}
	return out
}

// procAddr decodes an address of /proc/net/tcp: the bytes of the address
// as 32-bit words, each written in hex in the host's byte order.
func procAddr(h []byte) (netip.Addr, bool) {
	if len(h) != 8 && len(h) != 32 {
		return netip.Addr{}, false
	}
	raw := make([]byte, len(h)/2)
	if _, err := hex.Decode(raw, h); err != nil {
		return netip.Addr{}, false
	}
	b := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(b[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	ip, _ := netip.AddrFromSlice(b)
	return ip.Unmap(), true
}

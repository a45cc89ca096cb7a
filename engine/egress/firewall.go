package egress

import (
	"bytes"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
)

// Ports the engine serves on a session network's gateway.
const (
	ProxyPort       = 3128 // HTTP proxy (HTTP_PROXY, HTTPS_PROXY)
	TransparentPort = 3129 // every other TCP connection, redirected here
	DNSPort         = 53
)

// Firewall installs the host rules that leave a session's network no way
// out but the engine: on its bridge, the gateway's proxy, transparent and
// DNS ports are the only host services reachable (any other host address
// or port is dropped, which Docker's internal networks alone do not do);
// every other TCP connection is redirected to the transparent port; IPv6
// from the bridge is dropped. Rules live in a chain per session, so they
// come and go as a unit.
type Firewall struct{}

func chainName(id string) string { return "AIRLOCK-" + strings.ToUpper(id[:min(12, len(id))]) }

func run(bin string, args ...string) error {
	var errb bytes.Buffer
	c := exec.Command(bin, append([]string{"-w"}, args...)...)
	c.Stderr = &errb
	if err := c.Run(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return nil
}

// ensureJump inserts rule at the top of chain unless it is there.
func ensureJump(bin, table, chain string, rule ...string) error {
	check := append([]string{"-t", table, "-C", chain}, rule...)
	if run(bin, check...) == nil {
		return nil
	}
	return run(bin, append([]string{"-t", table, "-I", chain, "1"}, rule...)...)
}

// Add installs the rules of network key with gateway gw.
func (Firewall) Add(key string, gw netip.Addr) error {
	ch, bridge := chainName(key), BridgeName(key)
	g := gw.String()
	// filter: what the session may reach on the host.
	run("iptables", "-t", "filter", "-N", ch) // exists already after a restart
	if err := run("iptables", "-t", "filter", "-F", ch); err != nil {
		return err
	}
	for _, r := range [][]string{
		{"-d", g, "-p", "tcp", "--dport", strconv.Itoa(ProxyPort), "-j", "ACCEPT"},
		{"-d", g, "-p", "tcp", "--dport", strconv.Itoa(TransparentPort), "-j", "ACCEPT"},
		{"-d", g, "-p", "udp", "--dport", strconv.Itoa(DNSPort), "-j", "ACCEPT"},
		{"-d", g, "-p", "tcp", "--dport", strconv.Itoa(DNSPort), "-j", "ACCEPT"},
		{"-j", "DROP"},
	} {
		if err := run("iptables", append([]string{"-t", "filter", "-A", ch}, r...)...); err != nil {
			return err
		}
	}
	if err := ensureJump("iptables", "filter", "INPUT", "-i", bridge, "-j", ch); err != nil {
		return err
	}
	// nat: every TCP connection not to the gateway goes to the
	// transparent port, which forwards it under the policy or refuses it
	// with a logged reason.
	run("iptables", "-t", "nat", "-N", ch)
	if err := run("iptables", "-t", "nat", "-F", ch); err != nil {
		return err
	}
	if err := run("iptables", "-t", "nat", "-A", ch, "-p", "tcp", "!", "-d", g, "-j", "DNAT", "--to-destination", g+":"+strconv.Itoa(TransparentPort)); err != nil {
		return err
	}
	if err := ensureJump("iptables", "nat", "PREROUTING", "-i", bridge, "-j", ch); err != nil {
		return err
	}
	// Nothing is routed from or to the bridge: the gateway's ports are
	// the only way out.
	for _, dir := range []string{"-i", "-o"} {
		if err := ensureJump("iptables", "filter", "FORWARD", dir, bridge, "-j", "DROP"); err != nil {
			return err
		}
	}
	// IPv6: nothing from the session's bridge reaches the host.
	if err := ensureJump("ip6tables", "filter", "INPUT", "-i", bridge, "-j", "DROP"); err != nil {
		return err
	}
	return nil
}

// Remove deletes network key's rules; what is gone already is fine.
func (Firewall) Remove(key string) {
	ch, bridge := chainName(key), BridgeName(key)
	for run("iptables", "-t", "filter", "-D", "INPUT", "-i", bridge, "-j", ch) == nil {
	}
	run("iptables", "-t", "filter", "-F", ch)
	run("iptables", "-t", "filter", "-X", ch)
	for run("iptables", "-t", "nat", "-D", "PREROUTING", "-i", bridge, "-j", ch) == nil {
	}
	run("iptables", "-t", "nat", "-F", ch)
	run("iptables", "-t", "nat", "-X", ch)
	for run("ip6tables", "-t", "filter", "-D", "INPUT", "-i", bridge, "-j", "DROP") == nil {
	}
	for _, dir := range []string{"-i", "-o"} {
		for run("iptables", "-t", "filter", "-D", "FORWARD", dir, bridge, "-j", "DROP") == nil {
		}
	}
}

// Available reports whether the firewall tools are here.
func Available() error {
	for _, bin := range []string{"iptables", "ip6tables"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s is not installed: it comes with Docker (`apt-get install iptables`)", bin)
		}
	}
	return nil
}

// Installed lists the networks whose rules are all in place (chains and
// the jumps to them), from two listings of the tables: an engine that
// restarts re-opens its sessions without installing their rules again,
// which costs a dozen iptables calls each.
func Installed() map[string]bool {
	list := func(table string) string {
		out, err := exec.Command("iptables", "-w", "-t", table, "-S").Output()
		if err != nil {
			return ""
		}
		return string(out)
	}
	filter, nat := list("filter"), list("nat")
	out := map[string]bool{}
	for _, line := range strings.Split(filter, "\n") {
		// -A INPUT -i al-KEY -j AIRLOCK-KEY
		f := strings.Fields(line)
		if len(f) == 6 && f[0] == "-A" && f[1] == "INPUT" && f[2] == "-i" && f[4] == "-j" && strings.HasPrefix(f[5], "AIRLOCK-") {
			key := strings.TrimPrefix(f[3], "al-")
			ch := f[5]
			if strings.Contains(nat, "-A PREROUTING -i "+f[3]+" -j "+ch) && strings.Contains(filter, "-A "+ch+" -j DROP") &&
				strings.Contains(nat, "-A "+ch+" ") && strings.Contains(filter, "-A FORWARD -i "+f[3]+" -j DROP") {
				out[key] = true
			}
		}
	}
	return out
}

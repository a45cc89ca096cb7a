package network

import (
	"bytes"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
)

// Firewall is the host rules that leave a session's network no way out
// but the engine: on its bridge, the gateway's proxy, transparent and DNS
// ports are the only host services reachable (any other host address or
// port is dropped, which Docker's internal networks alone do not do);
// every other TCP connection is redirected to the transparent port; IPv6
// from the bridge is dropped. Declared by its consumer (the pool); the
// real one is IPTables.
type Firewall interface {
	// Available says what is missing for the rules to be installed.
	Available() error
	// Add installs the rules of network key with gateway gw; rules
	// already there are replaced, not doubled.
	Add(key string, gw netip.Addr) error
	// Remove deletes network key's rules; what is gone already is fine.
	Remove(key string)
	// Installed lists the networks whose rules are all in place.
	Installed() map[string]bool
}

// IPTables is the Firewall, by iptables and ip6tables. Rules live in a
// chain per network, so they come and go as a unit.
type IPTables struct{}

var _ Firewall = IPTables{}

func chainName(key string) string { return "AIRLOCK-" + strings.ToUpper(short(key)) }

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

// Add implements Firewall.
func (IPTables) Add(key string, gw netip.Addr) error {
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

// Remove implements Firewall.
func (IPTables) Remove(key string) {
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

// Available implements Firewall: the tools are installed.
func (IPTables) Available() error {
	for _, bin := range []string{"iptables", "ip6tables"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s is not installed: it comes with Docker (`apt-get install iptables`)", bin)
		}
	}
	return nil
}

// Installed implements Firewall: the networks whose chains and jumps are
// all there, from two listings of the tables. An engine that restarts
// re-opens its sessions without installing their rules again, which
// costs a dozen iptables calls each.
func (IPTables) Installed() map[string]bool {
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

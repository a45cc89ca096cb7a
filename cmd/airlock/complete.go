package main

import (
	"context"
	"strings"
	"time"

	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/harness"
	"github.com/spf13/cobra"
)

// Shell completion (`airlock completion bash|zsh|fish`, cobra's) completes
// what the engine knows: session ids wherever a command's usage names an
// ID, snapshots where it names a SNAPSHOT, and the values of --agent,
// --agents, --image, --net and --color. It asks a running engine and never
// starts one: with none answering, it offers nothing.

// completeTimeout bounds a completion's question to the engine.
const completeTimeout = 2 * time.Second

// argKind is what a positional argument names.
type argKind int

const (
	argOther argKind = iota
	argSession
	argSnapshot
)

// usageArgs reads a command's usage line into the kinds of its positional
// arguments; repeat says the last one repeats ("rm ID [ID...]"). Reading
// stops at the first argument that is neither an ID nor a SNAPSHOT.
func usageArgs(use string) (kinds []argKind, repeat bool) {
	words := strings.Fields(use)
	for _, w := range words[min(1, len(words)):] {
		w = strings.Trim(w, "[]")
		many := strings.HasSuffix(w, "...")
		switch strings.TrimSuffix(w, "...") {
		case "ID":
			kinds = append(kinds, argSession)
		case "SNAPSHOT":
			kinds = append(kinds, argSnapshot)
		default:
			return kinds, false
		}
		if many {
			return kinds, true
		}
	}
	return kinds, false
}

// addCompletions gives cmd and every command below it completion of
// sessions, snapshots and flag values.
func addCompletions(cmd *cobra.Command, g *globals) {
	for _, sub := range cmd.Commands() {
		addCompletions(sub, g)
	}
	if kinds, repeat := usageArgs(cmd.Use); len(kinds) > 0 && cmd.ValidArgsFunction == nil {
		cmd.ValidArgsFunction = g.completeArgs(kinds, repeat)
	}
	static := map[string][]string{
		"agent":  harness.Names(),
		"agents": harness.Installable(),
		"net":    {"allow-all", "deny-all", "custom", "ask"},
		"color":  {"auto", "always", "never"},
	}
	for name, values := range static {
		if cmd.Flags().Lookup(name) != nil {
			cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
		}
	}
	if cmd.Flags().Lookup("image") != nil {
		cmd.RegisterFlagCompletionFunc("image", g.completeImages)
	}
}

// completeArgs completes the positional argument at len(args) by its kind;
// a repeating last kind offers what args do not name yet.
func (g *globals) completeArgs(kinds []argKind, repeat bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		i := len(args)
		if i >= len(kinds) {
			if !repeat {
				return nil, cobra.ShellCompDirectiveDefault
			}
			i = len(kinds) - 1
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completeTimeout)
		defer cancel()
		var found []cobra.Completion
		switch kinds[i] {
		case argSession:
			found = g.sessionCompletions(ctx)
		case argSnapshot:
			found = g.snapshotCompletions(ctx)
		}
		return matching(found, toComplete, args), cobra.ShellCompDirectiveNoFileComp
	}
}

func (g *globals) sessionCompletions(ctx context.Context) []cobra.Completion {
	list, err := client.New(g.engine).Sessions(ctx)
	if err != nil {
		return nil
	}
	out := make([]cobra.Completion, 0, len(list))
	for _, s := range list {
		out = append(out, cobra.CompletionWithDesc(s.ID, s.State+" "+s.Project))
	}
	return out
}

// snapshotCompletions offers a named snapshot by its name, others by
// their short id.
func (g *globals) snapshotCompletions(ctx context.Context) []cobra.Completion {
	list, err := client.New(g.engine).Snapshots(ctx)
	if err != nil {
		return nil
	}
	out := make([]cobra.Completion, 0, len(list))
	for _, s := range list {
		ref := s.Name
		if ref == "" {
			ref = shortID(s.ID)
		}
		out = append(out, cobra.CompletionWithDesc(ref, "snapshot of "+dash(shortID(s.Session))+" "+s.Project))
	}
	return out
}

func (g *globals) completeImages(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	ctx, cancel := context.WithTimeout(cmd.Context(), completeTimeout)
	defer cancel()
	list, err := client.New(g.engine).Images(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, im := range list {
		if im.Name != "" {
			out = append(out, im.Name)
		}
	}
	return matching(out, toComplete, nil), cobra.ShellCompDirectiveNoFileComp
}

// matching keeps the completions that start with prefix and are not
// already among given.
func matching(all []cobra.Completion, prefix string, given []string) []cobra.Completion {
	var out []cobra.Completion
outer:
	for _, c := range all {
		value, _, _ := strings.Cut(c, "\t")
		if !strings.HasPrefix(value, prefix) {
			continue
		}
		for _, a := range given {
			if a == value {
				continue outer
			}
		}
		out = append(out, c)
	}
	return out
}

package main

import (
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/airlock/airlock/daemon"
	"github.com/airlock/airlock/engine/api"
	"github.com/spf13/cobra"
)

func pauseCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "pause ID",
		Short: "Freeze a session (its processes stop; new work with exec, shell or agent resumes it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			s, err := c.Pause(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "airlock: session %s is %s\n", s.ID, s.State)
			return nil
		},
	}
}

func resumeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "resume ID",
		Short: "Thaw a paused session",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			s, err := c.Resume(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "airlock: session %s is %s\n", s.ID, s.State)
			return nil
		},
	}
}

func hibernateCmd(g *globals) *cobra.Command {
	var req api.HibernateRequest
	cmd := &cobra.Command{
		Use:   "hibernate ID",
		Short: "Keep a session on disk only: its workspace, container layer and home in a checkpoint, no container, no memory (running processes are not kept unless --keep-processes; new work wakes it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			s, err := c.Hibernate(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "airlock: session %s is %s\n", s.ID, stateText(s))
			return nil
		},
	}
	cmd.Flags().BoolVar(&req.KeepProcesses, "keep-processes", false, "checkpoint the running processes with CRIU so that a wake restores them (needs an experimental Docker daemon and CRIU 4.1 or newer; refused otherwise)")
	return cmd
}

func wakeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "wake ID",
		Short: "Bring a hibernated session back from its checkpoint (exec, shell and agent do it by themselves)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			s, err := c.Wake(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "airlock: session %s is %s\n", s.ID, s.State)
			return nil
		},
	}
}

// stateText is a session's state, and for a hibernated one what it
// keeps on disk and whether its processes were kept.
func stateText(s api.Session) string {
	if s.State != api.StateHibernated || s.Hibernation == nil {
		return s.State
	}
	procs := "no processes"
	if s.Hibernation.Processes {
		procs = "processes kept"
	}
	return fmt.Sprintf("hibernated (%s on disk, %s)", bytesText(s.Hibernation.DiskBytes), procs)
}

func meterCmd(g *globals) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   "meter [ID]",
		Short: "What sessions used: active CPU, memory peak, workspace and egress bytes, cost",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			var ids []string
			if len(args) == 1 {
				ids = args
			} else {
				list, err := c.Sessions(ctx)
				if err != nil {
					return err
				}
				for _, s := range list {
					ids = append(ids, s.ID)
				}
			}
			var ms []api.Meter
			for _, id := range ids {
				m, err := c.Meter(ctx, id)
				if err != nil {
					return err
				}
				ms = append(ms, m)
			}
			if out.custom() {
				return printList(out, os.Stdout, ms, nil)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tCPU\tMEMORY PEAK\tWORKSPACE\tEGRESS OUT\tEGRESS IN\tCOST")
			for _, m := range ms {
				fmt.Fprintf(tw, "%s\t%.1fs\t%s\t%s\t%s\t%s\t$%.4f\n", m.Session, m.CPUSeconds, bytesText(m.MemoryPeak), bytesText(m.WorkspaceBytes),
					bytesText(m.EgressOut), bytesText(m.EgressIn), m.CostUSD)
			}
			tw.Flush()
			if len(ms) > 0 {
				fmt.Fprintf(os.Stderr, "cost: active CPU at $%.2f per core-hour\n", ms[0].Rate)
			}
			return nil
		},
	}
	out = addOutputFlags(cmd, "the meters (JSON lines)")
	out.lines = true
	return cmd
}

func budgetCmd(g *globals) *cobra.Command {
	var cpu time.Duration
	var cost float64
	cmd := &cobra.Command{
		Use:     "budget ID [--cpu DURATION] [--cost USD]",
		Short:   "Change a session's CPU or cost budget (0 removes it); raising one that paused it resumes it",
		Example: "  airlock budget 3f2a --cpu 3h\n  airlock budget 3f2a --cost 2.50",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var b api.Budgets
			if cmd.Flags().Changed("cpu") {
				b.CPU = &cpu
			}
			if cmd.Flags().Changed("cost") {
				b.Cost = &cost
			}
			if b.CPU == nil && b.Cost == nil {
				return usageErr("give --cpu DURATION or --cost USD")
			}
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			s, err := c.SetBudgets(cmd.Context(), args[0], b)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "airlock: session %s: CPU budget %s, cost budget $%.2f (0: none); %s\n", s.ID, s.CPUBudget, s.CostBudget, s.State)
			return nil
		},
	}
	cmd.Flags().DurationVar(&cpu, "cpu", 0, "active CPU the session may use, e.g. 2h")
	cmd.Flags().Float64Var(&cost, "cost", 0, "what the session may cost, in USD")
	return cmd
}

func limitsCmd(g *globals) *cobra.Command {
	var cpus float64
	var pids int64
	var memory, workspace string
	cmd := &cobra.Command{
		Use:     "limits ID [--cpus N] [--memory SIZE] [--pids N] [--workspace-size SIZE]",
		Short:   "Show or change a running session's limits",
		Example: "  airlock limits 3f2a --cpus 4 --memory 8g --workspace-size 4g",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l := api.Limits{CPUs: cpus, Pids: pids}
			var err error
			if l.Memory, err = daemon.ParseSize("--memory", memory); err != nil {
				return err
			}
			if l.WorkspaceSize, err = daemon.ParseSize("--workspace-size", workspace); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			var s api.Session
			if l == (api.Limits{}) {
				s, err = c.Session(ctx, args[0])
			} else {
				s, err = c.SetLimits(ctx, args[0], l)
			}
			if err != nil {
				return err
			}
			fmt.Printf("cpus %g\nmemory %d MiB (workspace writes included)\npids %d\nworkspace %d MiB", s.Limits.CPUs, s.Limits.Memory>>20, s.Limits.Pids, s.Limits.WorkspaceSize>>20)
			if s.Workspace != nil {
				fmt.Printf(" (%d MiB used)", s.Workspace.Used>>20)
			}
			fmt.Println()
			return nil
		},
	}
	cmd.Flags().Float64Var(&cpus, "cpus", 0, "CPU cap in cores")
	cmd.Flags().StringVar(&memory, "memory", "", "memory cap including workspace writes, e.g. 8g")
	cmd.Flags().Int64Var(&pids, "pids", 0, "process count cap")
	cmd.Flags().StringVar(&workspace, "workspace-size", "", "workspace size cap, e.g. 4g (not below what is written)")
	return cmd
}

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/harness"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func imageCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Build and list the local images sessions run in"}
	cmd.AddCommand(imageBuildCmd(g), imageLsCmd(g))
	return cmd
}

func imageBuildCmd(g *globals) *cobra.Command {
	var req api.ImageBuildRequest
	var tiny bool
	var agents string
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the default image (Debian with build tools, git, python3, node) locally, no registry needed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tiny {
				req.Kind = "tiny"
			}
			if agents != "" {
				if tiny {
					return usageErr("--agents and --tiny do not mix: agents need the default image")
				}
				req.Kind = "agents"
				req.Agents = strings.Split(agents, ",")
			}
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			show := newProgressLine(os.Stderr)
			img, err := c.BuildImage(ctx, req, show.update)
			show.finish()
			if err != nil {
				return err
			}
			fmt.Printf("%s %s (%d MB)\n", img.Name, shortID(img.ID), img.Size>>20)
			return nil
		},
	}
	cmd.Flags().StringVar(&agents, "agents", "", "also install agent CLIs at pinned versions into "+api.DefaultAgentsImage+": "+strings.Join(harness.Installable(), ","))
	cmd.Flags().BoolVar(&tiny, "tiny", false, "build airlock/tiny from the host's busybox instead (seconds; for tests)")
	cmd.Flags().BoolVar(&req.Force, "force", false, "rebuild even if the image is up to date")
	cmd.Flags().StringVar(&req.Name, "name", "", "image name (default airlock/base, or airlock/tiny)")
	cmd.Flags().StringVar(&req.Suite, "suite", "", "Debian suite (default: the host's, else stable)")
	cmd.Flags().StringVar(&req.Mirror, "mirror", "", "Debian mirror URL (default: debootstrap's)")
	return cmd
}

func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// progressLine shows build progress: one rewritten line on a terminal,
// one line per stage change (and every few seconds) otherwise.
type progressLine struct {
	f        *os.File
	tty      bool
	stage    string
	lastLine time.Time
	dirty    bool
}

func newProgressLine(f *os.File) *progressLine {
	return &progressLine{f: f, tty: term.IsTerminal(int(f.Fd()))}
}

func (p *progressLine) update(pr api.Progress) {
	msg := pr.Message
	if pr.Current > 0 {
		msg = fmt.Sprintf("[%d] %s", pr.Current, msg)
	}
	line := fmt.Sprintf("%6s  %-11s %s", pr.Elapsed.Round(time.Second), pr.Stage, msg)
	if p.tty {
		width := 100
		if w, _, err := term.GetSize(int(p.f.Fd())); err == nil && w > 10 {
			width = w - 1
		}
		if len(line) > width {
			line = line[:width]
		}
		if pr.Done || pr.Error != nil || pr.Stage != p.stage {
			if p.dirty {
				fmt.Fprint(p.f, "\n")
			}
		}
		fmt.Fprintf(p.f, "\r\x1b[K%s", line)
		p.dirty = true
		p.stage = pr.Stage
		return
	}
	if pr.Stage != p.stage || pr.Done || pr.Error != nil || time.Since(p.lastLine) > 5*time.Second {
		fmt.Fprintln(p.f, line)
		p.lastLine = time.Now()
		p.stage = pr.Stage
	}
}

func (p *progressLine) finish() {
	if p.tty && p.dirty {
		fmt.Fprintln(p.f)
	}
}

func imageLsCmd(g *globals) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List local images",
		Args:  cobra.NoArgs,
		RunE: listRun(g, &out, func(ctx context.Context, c *client.Client, _ []string) ([]api.Image, error) {
			return c.Images(ctx)
		}, func(list []api.Image) error {
			return table("NAME\tID\tSIZE\tCREATED", func(tw io.Writer) {
				for _, im := range list {
					fmt.Fprintf(tw, "%s\t%s\t%d MB\t%s\n", im.Name, shortID(im.ID), im.Size>>20, ago(im.Created))
				}
			})
		}),
	}
	out = addOutputFlags(cmd, "the images")
	return cmd
}

package engine

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/airlock/airlock/engine/agent"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/egress"
	"github.com/airlock/airlock/engine/images"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/engine/timeline"
	"github.com/airlock/airlock/errdefs"
	"github.com/docker/docker/api/types/container"
)

// AgentsLabel lists, on an image, the agent CLIs installed in it
// (name@version, comma separated).
const AgentsLabel = images.AgentsLabel

// DefaultAgentsImage is the image agent sessions use unless told
// otherwise: the default image plus agent CLIs.
const DefaultAgentsImage = images.AgentsName

// AgentDefaults are an agent's settings from the engine's config.
type AgentDefaults = agent.Defaults

// Agent runs one agent turn in a session (see agent.Runner.Run): its
// events are stored and passed to sink as they come. If ctx ends the turn
// goes on and is recorded; sink is no longer called. A hibernated
// session wakes for it.
func (e *Engine) Agent(ctx context.Context, id string, req api.AgentRequest, sink func(api.Event)) (api.Turn, error) {
	if err := e.awake(ctx, id); err != nil {
		return api.Turn{}, err
	}
	return e.agents.Run(ctx, id, req, sink)
}

// Turns lists a session's agent turns.
func (e *Engine) Turns(ctx context.Context, id string) ([]api.Turn, error) {
	return e.agents.Turns(ctx, id)
}

// Events lists a session's agent events, of one turn if turn > 0.
func (e *Engine) Events(ctx context.Context, id string, turn int) ([]api.Event, error) {
	return e.agents.Events(ctx, id, turn)
}

// newAgents wires engine/agent to the session core.
func newAgents(e *Engine) *agent.Runner {
	core := agentCore{e}
	return agent.New(core, core, core, e.store, agent.Options{
		Defaults:    func(name string) agent.Defaults { return e.defs().Agents[name] },
		AgentsImage: DefaultAgentsImage,
		Logger:      e.log,
		Ended: func(ctx context.Context, t api.Turn) {
			if _, _, err := e.timeline.Record(ctx, t.Session, timeline.Mark{Kind: api.CheckpointTurn, Turn: t.N, Since: t.Started, Always: true}); err != nil {
				e.log.Warn("checkpoint after a turn", "session", t.Session, "turn", t.N, "err", err)
			}
		},
	})
}

// agentCore is the session core as engine/agent sees it.
type agentCore struct{ e *Engine }

var (
	_ agent.Sessions = agentCore{}
	_ agent.Egress   = agentCore{}
	_ agent.Secrets  = agentCore{}
	_ agent.Store    = (*store.Store)(nil)
)

func (c agentCore) Session(ctx context.Context, id string) (agent.Session, error) {
	rec, err := c.e.store.Session(ctx, id)
	if err != nil {
		return agent.Session{}, err
	}
	return agent.Session{ID: rec.ID, State: rec.State, Error: rec.Error, Image: rec.Image, Memory: rec.Limits.Memory}, nil
}

func (c agentCore) Working(ctx context.Context, id string) (func(), error) {
	_, done, err := c.e.working(ctx, id)
	return done, err
}

func (c agentCore) Exec(ctx context.Context, id string, argv, env []string, stdout, stderr io.Writer) (int, error) {
	return c.e.Exec(ctx, id, api.ExecRequest{Argv: argv, Env: env}, ExecIO{Stdout: stdout, Stderr: stderr, noCheckpoint: true})
}

// InstalledAgents reads the AgentsLabel of the image the session's
// container runs, by id: its name may have been built again since, with
// other agents.
func (c agentCore) InstalledAgents(ctx context.Context, id string) ([]string, bool) {
	rec, err := c.e.store.Session(ctx, id)
	if err != nil {
		return nil, false
	}
	ctr, err := c.e.docker.ContainerInspect(ctx, rec.ContainerID)
	if err != nil {
		return nil, false
	}
	ins, err := c.e.docker.ImageInspect(ctx, ctr.Image)
	if err != nil || ins.Config == nil {
		return nil, false
	}
	l, ok := ins.Config.Labels[AgentsLabel]
	if !ok {
		return nil, false
	}
	var names []string
	for _, a := range strings.Split(l, ",") {
		names = append(names, strings.SplitN(a, "@", 2)[0])
	}
	return names, true
}

func (c agentCore) CPU(id string) time.Duration { return time.Duration(c.e.sessionCPU(id)) }

func (c agentCore) Policy(id string) *egress.Policy {
	if l := c.e.liveSession(id); l != nil && l.net != nil {
		return l.net.Gateway.proxy.Policy()
	}
	return nil
}

func (c agentCore) ChangePolicy(ctx context.Context, id string, ch api.PolicyChange) error {
	_, err := c.e.Policy(ctx, id, ch)
	return err
}

func (c agentCore) Secret(ctx context.Context, session, name string) (string, error) {
	return c.e.secret(ctx, session, name)
}

func (c agentCore) SetSessionSecret(session, name, value string) {
	c.e.setSessionSecret(session, name, value)
}

// Probe runs a short unrecorded command and returns its exit code.
func (c agentCore) Probe(ctx context.Context, id string, argv []string) (int, error) {
	rec, err := c.e.store.Session(ctx, id)
	if err != nil {
		return -1, err
	}
	created, err := c.e.docker.ContainerExecCreate(ctx, rec.ContainerID, container.ExecOptions{Cmd: argv, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return -1, dockerError("look into the session", err)
	}
	hj, err := c.e.docker.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return -1, dockerError("look into the session", err)
	}
	io.Copy(io.Discard, hj.Reader)
	hj.Close()
	code, _ := c.e.execExit(created.ID)
	if code == nil {
		return -1, errdefs.Unavailablef("could not read a probe's exit code from Docker")
	}
	return *code, nil
}

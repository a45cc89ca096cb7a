package agent

import (
	"context"
	"slices"
	"strings"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/harness"
)

// plan is a turn that passed its checks and may run.
type plan struct {
	sess   Session
	ag     *harness.Agent
	t      harness.Turn    // the prompt as the agent gets it, with a schema's instructions
	schema *harness.Schema // nil without --schema
	// costBefore is what the conversation cost in earlier turns, for
	// CLIs that report its total.
	costBefore float64
}

// prepare checks, in order, what would otherwise fail slowly or leak:
// the session and the prompt, the agent, the key, the command line, the
// CLI in the image, the endpoint; and binds the endpoint into the
// session's policy.
func (r *Runner) prepare(ctx context.Context, id string, req api.AgentRequest) (plan, error) {
	sess, err := r.sessions.Session(ctx, id)
	if err != nil {
		return plan{}, err
	}
	if sess.State != api.StateRunning {
		return plan{}, errdefs.Conflictf("session %s is %s: %s", sess.ID, sess.State, firstOf(sess.Error, "start a new session with `airlock run`"))
	}
	if strings.TrimSpace(req.Prompt) == "" {
		return plan{}, errdefs.Invalidf("no prompt given: say what the agent should do, e.g. --prompt \"fix the failing test\"")
	}
	turns, err := r.store.Turns(ctx, sess.ID)
	if err != nil {
		return plan{}, err
	}
	ag, err := chooseAgent(sess.ID, req.Agent, turns)
	if err != nil {
		return plan{}, err
	}
	p := plan{sess: sess, ag: ag, t: r.harnessTurn(ag, req)}
	if ag.Continues && !req.New {
		p.t.Resume, p.costBefore = resume(ag, turns)
	}
	if len(req.Schema) > 0 {
		if p.schema, err = harness.CompileSchema(req.Schema); err != nil {
			return plan{}, errdefs.Invalidf("--schema: %v: give a JSON Schema document", err)
		}
		p.t.Prompt += p.schema.Instructions()
	}
	if err := r.checkKey(ctx, sess.ID, ag, req.APIKey); err != nil {
		return plan{}, err
	}
	if _, err := ag.Command(p.t); err != nil {
		return plan{}, errdefs.Invalidf("%v", err)
	}
	if err := r.checkInstalled(ctx, sess, ag); err != nil {
		return plan{}, err
	}
	ep, err := parseEndpoint(firstOf(p.t.BaseURL, ag.DefaultBaseURL))
	if err != nil {
		return plan{}, err
	}
	if err := r.canInject(sess.ID, ag, ep); err != nil {
		return plan{}, err
	}
	if err := r.checkReachable(ctx, ep); err != nil {
		return plan{}, err
	}
	// The session may reach the endpoint, and the key travels host-side:
	// the session's proxy sets it on the endpoint's requests, and the CLI
	// only has a placeholder.
	return p, r.bindEndpoint(ctx, sess.ID, ag, ep, req.APIKey)
}

// chooseAgent is the named agent, or the one of the session's last turn.
func chooseAgent(session, name string, turns []api.Turn) (*harness.Agent, error) {
	if name == "" {
		if len(turns) == 0 {
			return nil, errdefs.Invalidf("session %s has no agent yet: name one with --agent (%s)", session, strings.Join(harness.Names(), ", "))
		}
		name = turns[len(turns)-1].Agent
	}
	ag, err := harness.Lookup(name)
	if err != nil {
		return nil, errdefs.Invalidf("%v", err)
	}
	return ag, nil
}

// harnessTurn is the request as the harness takes it, with the model and
// endpoint from the request, else the config, else the agent's own.
func (r *Runner) harnessTurn(ag *harness.Agent, req api.AgentRequest) harness.Turn {
	def := r.opts.Defaults(ag.Name)
	return harness.Turn{Prompt: req.Prompt, Model: firstOf(req.Model, def.Model, ag.DefaultModel),
		BaseURL: firstOf(req.BaseURL, def.BaseURL), Cmd: req.Cmd, Events: req.Events}
}

// resume is the agent's last conversation in the session, and what it
// cost so far when the CLI reports a conversation's total.
func resume(ag *harness.Agent, turns []api.Turn) (conversation string, costBefore float64) {
	for _, tr := range slices.Backward(turns) {
		if tr.Agent == ag.Name && tr.AgentSession != "" {
			conversation = tr.AgentSession
			break
		}
	}
	if !ag.CumulativeCost || conversation == "" {
		return conversation, 0
	}
	for _, tr := range turns {
		if tr.Agent == ag.Name && tr.AgentSession == conversation {
			costBefore += tr.Usage.CostUSD
		}
	}
	return conversation, costBefore
}

// checkKey checks that the agent has a key: given by the caller, or one
// for the session or stored.
func (r *Runner) checkKey(ctx context.Context, session string, ag *harness.Agent, given string) error {
	if ag.KeyEnv == "" || given != "" {
		return nil
	}
	_, err := r.secrets.Secret(ctx, session, ag.KeyEnv)
	if errdefs.IsNotFound(err) {
		return errdefs.Invalidf("no API key for %s: set %s in the environment of the airlock command, or store it with `airlock secret set %s`", ag.Title, ag.KeyEnv, ag.KeyEnv)
	}
	return err
}

// checkInstalled tells whether the agent's CLI is in the session: from
// the image's word when it has one, else by looking for it.
func (r *Runner) checkInstalled(ctx context.Context, sess Session, ag *harness.Agent) error {
	if ag.Bin == "" {
		return nil
	}
	missing := errdefs.NotFoundf("%s (%s) is not installed in image %s: build an image with it, `airlock image build --agents %s`, and run with --image %s",
		ag.Title, ag.Bin, sess.Image, ag.Name, r.opts.AgentsImage)
	if names, known := r.sessions.InstalledAgents(ctx, sess.ID); known {
		if slices.Contains(names, ag.Name) {
			return nil
		}
		return missing
	}
	code, err := r.sessions.Probe(ctx, sess.ID, []string{"/bin/sh", "-c", "command -v " + ag.Bin})
	if err != nil {
		return err
	}
	if code != 0 {
		return missing
	}
	return nil
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

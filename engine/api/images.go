package api

// DefaultAgentsImage is the image with the agent CLIs that agent sessions
// use unless a request names another (`airlock image build --agents`
// builds it); clients name it in defaults and help.
const DefaultAgentsImage = "airlock/agents"

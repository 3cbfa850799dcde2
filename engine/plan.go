package engine

import (
	"encoding/json"
	"fmt"
	"strings"
)

// planToolSpec is the engine's own tool through which the model publishes
// its plan (as Codex CLI's update_plan and Claude Code's TodoWrite do). Each
// call becomes a PlanEvent; calling it again replaces the plan.
var planToolSpec = ToolSpec{
	Name: "update_plan",
	Description: "Publish your plan for the task as numbered steps, each with the files it involves, " +
		"before you start on a task of more than one step; call it again when the plan changes.",
	InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "steps": {
      "type": "array",
      "minItems": 1,
      "items": {
        "type": "object",
        "properties": {
          "description": {"type": "string", "description": "What the step does."},
          "files_involved": {"type": "array", "items": {"type": "string"}, "description": "Workspace-relative paths."},
          "status": {"type": "string", "enum": ["pending", "in_progress", "completed"], "description": "Where the step stands; call update_plan again as steps complete."}
        },
        "required": ["description"]
      }
    },
    "rationale": {"type": "string", "description": "Why this plan."}
  },
  "required": ["steps"]
}`),
	Risk:     RiskLow,
	ReadOnly: true,
}

// updatePlan handles an update_plan call: it validates the plan and emits
// it as a PlanEvent.
func (t *turn) updatePlan(args json.RawMessage) (ToolResult, error) {
	var in struct {
		Steps []struct {
			Description   string     `json:"description"`
			FilesInvolved []string   `json:"files_involved"`
			Status        StepStatus `json:"status"`
		} `json:"steps"`
		Rationale string `json:"rationale"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return ToolResult{}, ToolErrorf(ToolCodeInvalidInput, "update_plan: %v; send {\"steps\":[{\"description\":...}]}", err)
	}
	if len(in.Steps) == 0 {
		return ToolResult{}, ToolErrorf(ToolCodeInvalidInput, "update_plan: steps is empty; send at least one step")
	}
	plan := &PlanEvent{Rationale: in.Rationale}
	for i, st := range in.Steps {
		if strings.TrimSpace(st.Description) == "" {
			return ToolResult{}, ToolErrorf(ToolCodeInvalidInput, "update_plan: step %d has no description", i+1)
		}
		switch st.Status {
		case "", StepPending, StepInProgress, StepCompleted:
		default:
			return ToolResult{}, ToolErrorf(ToolCodeInvalidInput, "update_plan: step %d has status %q; use pending, in_progress or completed", i+1, st.Status)
		}
		plan.Steps = append(plan.Steps, PlanStep{Number: i + 1, Description: st.Description, FilesInvolved: st.FilesInvolved, Status: st.Status})
	}
	t.emit(plan)
	return JSONResult(map[string]any{"recorded": true, "steps": len(plan.Steps)},
		fmt.Sprintf("plan with %d steps", len(plan.Steps)))
}

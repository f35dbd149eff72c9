package eval

import (
	"context"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// The answer and judge prompts follow the protocol of the published LoCoMo
// LLM-judge numbers: answer briefly from the retrieved memories only, then a judge
// labels the answer CORRECT or WRONG against the gold answer, generous on wording
// and on date formats. Category 5 (adversarial) is excluded, as there.
const answerPrompt = `You are an intelligent memory assistant tasked with retrieving accurate information from conversation memories.
Answer the question using only the memories below. If the memories contain timestamps, use them to resolve relative times ("last year", "two months ago").
Answer in at most 5-6 words.

Memories:
%s

Question: %s
Answer:`

const judgePrompt = `Your task is to label an answer to a question as 'CORRECT' or 'WRONG'. You will be given the following data:
(1) a question (posed by one user to another user),
(2) a 'gold' (ground truth) answer,
(3) a generated answer
which you will score as CORRECT/WRONG.

The point of the question is to ask about something one user should know about the other user based on their prior conversations.
The gold answer will usually be a concise and short answer that includes the referenced topic, for example:
Question: Do you remember what I got the last time I went to Hawaii?
Gold answer: A shell necklace
The generated answer might be much longer, but you should be generous with your grading - as long as it touches on the same topic as the gold answer, it should be counted as CORRECT.

For time related questions, the gold answer will be a specific date, month, year, etc. The generated answer might be much longer or use relative time references (like "last Tuesday" or "next month"), but you should be generous with your grading - as long as it refers to the same date or time period as the gold answer, it should be counted as CORRECT. Even if the format differs (e.g., "May 7th" vs "7 May"), consider it CORRECT if it's the same date.

Now it's time for the real question:
Question: %s
Gold answer: %s
Generated answer: %s

First, provide a short (one sentence) explanation of your reasoning, then finish with CORRECT or WRONG.
Do NOT include both CORRECT and WRONG in your response, or it will break the evaluation script.`

// Judge answers each question from its recalled context and grades the answer.
type Judge struct {
	c     *openai.Client
	model string
}

// NewJudge returns a judge on an OpenAI-compatible endpoint, or nil when none is configured.
func NewJudge(cfg LLMConfig) *Judge {
	if cfg.BaseURL == "" {
		return nil
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	return &Judge{c: openai.NewClientWithConfig(oc), model: cfg.Model}
}

func (j *Judge) ask(ctx context.Context, prompt string) (string, error) {
	resp, err := j.c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: j.model, Temperature: 0,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: prompt}}})
	if err != nil {
		return "", err
	}
	if len(resp.Choices) == 0 {
		return "", fmt.Errorf("no choice in the answer")
	}
	return resp.Choices[0].Message.Content, nil
}

// Grade answers a question from memories and labels the answer; correct is the judge's verdict.
func (j *Judge) Grade(ctx context.Context, question, gold string, memories []string) (answer string, correct bool, err error) {
	answer, err = j.ask(ctx, fmt.Sprintf(answerPrompt, strings.Join(memories, "\n"), question))
	if err != nil {
		return "", false, fmt.Errorf("answer: %w", err)
	}
	verdict, err := j.ask(ctx, fmt.Sprintf(judgePrompt, question, gold, answer))
	if err != nil {
		return answer, false, fmt.Errorf("judge: %w", err)
	}
	v := strings.ToUpper(verdict)
	return answer, strings.Contains(v, "CORRECT") && !strings.Contains(v, "WRONG"), nil
}

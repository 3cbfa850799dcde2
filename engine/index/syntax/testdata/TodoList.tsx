import React, { useCallback, useEffect, useMemo, useReducer, useState } from "react";

export interface Todo {
  id: number;
  title: string;
  done: boolean;
  tags: string[];
}

type Filter = "all" | "active" | "done";

type Action =
  | { type: "add"; title: string }
  | { type: "toggle"; id: number }
  | { type: "remove"; id: number }
  | { type: "rename"; id: number; title: string }
  | { type: "load"; todos: Todo[] };

const STORAGE_KEY = "todos.v1";

let nextId = 1;

export function todosReducer(state: Todo[], action: Action): Todo[] {
  switch (action.type) {
    case "add":
      return [...state, { id: nextId++, title: action.title.trim(), done: false, tags: [] }];
    case "toggle":
      return state.map((t) => (t.id === action.id ? { ...t, done: !t.done } : t));
    case "remove":
      return state.filter((t) => t.id !== action.id);
    case "rename":
      return state.map((t) => (t.id === action.id ? { ...t, title: action.title } : t));
    case "load":
      nextId = Math.max(0, ...action.todos.map((t) => t.id)) + 1;
      return action.todos;
    default:
      return state;
  }
}

function usePersistentTodos(): [Todo[], React.Dispatch<Action>] {
  const [todos, dispatch] = useReducer(todosReducer, []);
  useEffect(() => {
    const raw = window.localStorage.getItem(STORAGE_KEY);
    if (raw) {
      dispatch({ type: "load", todos: JSON.parse(raw) as Todo[] });
    }
  }, []);
  useEffect(() => {
    window.localStorage.setItem(STORAGE_KEY, JSON.stringify(todos));
  }, [todos]);
  return [todos, dispatch];
}

interface ItemProps {
  todo: Todo;
  onToggle(id: number): void;
  onRemove: (id: number) => void;
  onRename: (id: number, title: string) => void;
}

const TodoItem: React.FC<ItemProps> = ({ todo, onToggle, onRemove, onRename }) => {
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState(todo.title);

  const commit = () => {
    setEditing(false);
    if (draft.trim() && draft !== todo.title) {
      onRename(todo.id, draft.trim());
    }
  };

  return (
    <li className={todo.done ? "todo done" : "todo"}>
      <input type="checkbox" checked={todo.done} onChange={() => onToggle(todo.id)} />
      {editing ? (
        <input
          autoFocus
          value={draft}
          onChange={(e) => setDraft(e.target.value)}
          onBlur={commit}
          onKeyDown={(e) => e.key === "Enter" && commit()}
        />
      ) : (
        <span onDoubleClick={() => setEditing(true)}>{todo.title}</span>
      )}
      <button aria-label="remove" onClick={() => onRemove(todo.id)}>
        ×
      </button>
    </li>
  );
};

export default function TodoList({ title = "Todos" }: { title?: string }) {
  const [todos, dispatch] = usePersistentTodos();
  const [filter, setFilter] = useState<Filter>("all");
  const [input, setInput] = useState("");

  const visible = useMemo(
    () => todos.filter((t) => (filter === "all" ? true : filter === "done" ? t.done : !t.done)),
    [todos, filter],
  );
  const remaining = todos.filter((t) => !t.done).length;

  const add = useCallback(() => {
    if (input.trim()) {
      dispatch({ type: "add", title: input });
      setInput("");
    }
  }, [input, dispatch]);

  return (
    <section className="todo-list">
      <h1>{title}</h1>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          add();
        }}
      >
        <input value={input} placeholder="What needs doing?" onChange={(e) => setInput(e.target.value)} />
      </form>
      <ul>
        {visible.map((todo) => (
          <TodoItem
            key={todo.id}
            todo={todo}
            onToggle={(id) => dispatch({ type: "toggle", id })}
            onRemove={(id) => dispatch({ type: "remove", id })}
            onRename={(id, title) => dispatch({ type: "rename", id, title })}
          />
        ))}
      </ul>
      <footer>
        {remaining} left
        {(["all", "active", "done"] as Filter[]).map((f) => (
          <button key={f} disabled={f === filter} onClick={() => setFilter(f)}>
            {f}
          </button>
        ))}
      </footer>
    </section>
  );
}

// The latest profiled runs' findings of one cluster, newest first, as kernels stored them.
import * as React from 'react';

/** One finding of a run: what happened and the fix (see eugo.hpc.profile). */
export interface IFinding {
  kind: string;
  function: string;
  message: string;
  fix: string;
}

/**
 * Where each kind of finding is explained: the docs' run-report guide, one section per kind
 * (DOCS_URL in eugo_jupyter/hpc/_insights/_base.py; Sphinx writes `_` in the label as `-`).
 */
export const DOCS_URL = 'https://eugo-jupyter.readthedocs.io/en/latest/';

export function findingDocUrl(kind: string): string {
  return `${DOCS_URL}guides/run-report.html#finding-${kind.replace(/_/g, '-')}`;
}

/** One profiled run, as `eugo_jupyter.records.RunFindings` stores it. */
export interface IRunFindings {
  created: number;
  functions: string[];
  summary: {
    tasks?: number;
    duration_s?: number;
    busy_s?: number;
    speedup?: number;
    utilisation?: number;
    cpus?: number;
  };
  timeline: {
    workers?: number;
    first_start_s?: number;
    last_end_s?: number;
    tail_s?: number;
  };
  findings: IFinding[];
}

function seconds(value: number | undefined): string {
  if (value === undefined || !isFinite(value)) {
    return '–';
  }
  return value < 1
    ? `${(value * 1000).toFixed(0)} ms`
    : `${value.toFixed(2)} s`;
}

function when(created: number): string {
  return new Date(created * 1000).toLocaleString();
}

function Run({ run }: { run: IRunFindings }): JSX.Element {
  const s = run.summary;
  const t = run.timeline;
  return (
    <li className="eugo-Run" data-created={run.created}>
      <div className="eugo-Run-head">
        <span className="eugo-Run-functions">
          {run.functions.join(', ') || 'run'}
        </span>
        <time className="eugo-Run-when">{when(run.created)}</time>
      </div>
      <div className="eugo-Run-numbers" aria-label="Run numbers">
        <span data-key="speedup">speedup {(s.speedup ?? 0).toFixed(2)}×</span>
        <span data-key="tasks">
          {s.tasks ?? 0} tasks in {seconds(s.duration_s)}
        </span>
        <span data-key="utilisation">
          {Math.round((s.utilisation ?? 0) * 100)}% of {s.cpus ?? 0} CPUs busy
        </span>
        <span data-key="timeline">
          {t.workers ?? 0} worker{t.workers === 1 ? '' : 's'}, tasks from{' '}
          {seconds(t.first_start_s)} to {seconds(t.last_end_s)}, tail{' '}
          {seconds(t.tail_s)}
        </span>
      </div>
      {run.findings.length === 0 ? (
        <p className="eugo-Run-clean">
          No findings: none of the known pitfalls showed up.
        </p>
      ) : (
        <ul className="eugo-Findings-list">
          {run.findings.map((f, index) => (
            <li key={index} className="eugo-Finding" data-kind={f.kind}>
              <a
                className="eugo-Tag"
                href={findingDocUrl(f.kind)}
                target="_blank"
                rel="noopener noreferrer"
                title="What this finding means"
              >
                {f.kind}
              </a>{' '}
              <code>{f.function}</code>
              <p className="eugo-Finding-message">{f.message}</p>
              <p className="eugo-Finding-fix">
                <b>Fix:</b> {f.fix}
              </p>
            </li>
          ))}
        </ul>
      )}
    </li>
  );
}

/** The card's findings section; nothing at all until a profiled run has been stored. */
export function FindingsSection({
  runs
}: {
  runs?: IRunFindings[];
}): JSX.Element | null {
  if (!runs || runs.length === 0) {
    return null;
  }
  const ordered = [...runs].sort((a, b) => b.created - a.created);
  return (
    <details className="eugo-Card-findings" open>
      <summary>
        Findings of profiled runs{' '}
        <span className="eugo-Count">{ordered.length}</span>
      </summary>
      <ol className="eugo-Runs">
        {ordered.map(run => (
          <Run key={run.created} run={run} />
        ))}
      </ol>
    </details>
  );
}

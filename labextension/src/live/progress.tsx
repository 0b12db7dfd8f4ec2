// Progress: per function, map run and %%distribute cell, done / running / waiting / failed as
// one stacked bar; requests no node can ever run stand out in red with the card's sentence.
import * as React from 'react';

import { IWaiting } from '../api';
import { ClusterStore } from '../model';
import { WaitingBanner } from '../panel/resources';
import { IProgressGroup, IProgressReply } from './api';
import { LiveSource } from './source';

const PARTS: (keyof Pick<
  IProgressGroup,
  'done' | 'running' | 'waiting' | 'failed'
>)[] = ['done', 'running', 'waiting', 'failed'];

const KIND_TEXT: Record<string, string> = {
  function: 'function',
  map: 'map',
  cell: '%%distribute'
};

export class ProgressSource extends LiveSource<IProgressReply> {
  constructor(store: ClusterStore) {
    super(store, 'progress', 'the progress', 1500);
  }

  groups: IProgressGroup[] = [];
  waiting: IWaiting[] = [];
  /** Waiting tasks the server did not read (beyond its bound): counted, not grouped. */
  moreWaiting = 0;

  protected reset(): void {
    this.groups = [];
    this.waiting = [];
    this.moreWaiting = 0;
  }

  protected ingest(reply: IProgressReply): void {
    this.groups = reply.groups.slice(0, 200);
    this.waiting = reply.waiting ?? [];
    this.moreWaiting = reply.waiting_truncated ?? 0;
  }

  protected summary(): string {
    const n = this.groups.length;
    return `${n} ${n === 1 ? 'group' : 'groups'}`;
  }
}

function GroupRow({ group }: { group: IProgressGroup }): JSX.Element {
  const total = PARTS.reduce((sum, part) => sum + (group[part] ?? 0), 0);
  return (
    <li
      className="eugo-Progress-group"
      data-key={group.key}
      aria-label={group.label}
    >
      <div className="eugo-Progress-head">
        <span className="eugo-Progress-label" title={group.label}>
          {group.label}
        </span>
        <span className="eugo-Tag">{KIND_TEXT[group.kind] ?? group.kind}</span>
      </div>
      <div
        className="eugo-Progress-bar"
        role="meter"
        aria-label={`${group.label}: done`}
        aria-valuemin={0}
        aria-valuemax={total}
        aria-valuenow={group.done}
      >
        {PARTS.map(part =>
          group[part] > 0 ? (
            <span
              key={part}
              className={`eugo-Progress-part eugo-mod-${part}`}
              style={{ width: `${(group[part] / Math.max(1, total)) * 100}%` }}
            />
          ) : null
        )}
      </div>
      <dl className="eugo-Progress-counts">
        {PARTS.map(part => (
          <div
            key={part}
            className={`eugo-mod-${part} ${group[part] > 0 ? 'eugo-mod-nonzero' : ''}`}
            data-state={part}
          >
            <dt>{part}</dt>
            <dd>{(group[part] ?? 0).toLocaleString()}</dd>
          </div>
        ))}
      </dl>
    </li>
  );
}

export function ProgressView({
  source
}: {
  source: ProgressSource;
}): JSX.Element {
  return (
    <div className="eugo-Progress">
      <WaitingBanner waiting={source.waiting} />
      {source.groups.length === 0 ? (
        <p className="eugo-Empty">
          No task has run on this cluster yet: progress shows here per function,
          map run and %%distribute cell.
        </p>
      ) : (
        <ul className="eugo-Progress-groups">
          {source.groups.map(group => (
            <GroupRow key={group.key} group={group} />
          ))}
        </ul>
      )}
      {source.moreWaiting > 0 && (
        <p className="eugo-Progress-more">
          +{source.moreWaiting.toLocaleString()} more waiting (beyond what the
          server reads, so in no bar above)
        </p>
      )}
    </div>
  );
}

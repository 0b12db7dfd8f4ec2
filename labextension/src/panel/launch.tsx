// The local launch form: a name, the head's CPUs/GPUs, any worker nodes, and the lifetime.
import { addIcon, closeIcon } from '@jupyterlab/ui-components';
import { CommandRegistry } from '@lumino/commands';
import * as React from 'react';

import { ILocalRequest, INodeSpec, Lifetime } from '../api';
import { CommandIDs } from '../commands';
import {
  ClusterNameField,
  FormActions,
  LifetimeField,
  NumberInput,
  usePending
} from './fields';

interface INodeRowProps {
  label: string;
  spec: INodeSpec;
  onChange: (spec: INodeSpec) => void;
  onRemove?: () => void;
}

function NodeRow({
  label,
  spec,
  onChange,
  onRemove
}: INodeRowProps): JSX.Element {
  const slug = label.toLowerCase().replace(/\s+/g, '-');
  return (
    <div className="eugo-NodeSpec" data-node={slug}>
      <span className="eugo-NodeSpec-label">{label}</span>
      <NumberInput
        ariaLabel={`${label} CPUs`}
        min={0}
        max={1024}
        value={spec.num_cpus}
        onChange={n => onChange({ ...spec, num_cpus: n })}
      />
      <NumberInput
        ariaLabel={`${label} GPUs`}
        min={0}
        max={64}
        value={spec.num_gpus}
        onChange={n => onChange({ ...spec, num_gpus: n })}
      />
      {onRemove ? (
        <button
          type="button"
          className="eugo-IconButton"
          title={`Remove ${label.toLowerCase()}`}
          aria-label={`Remove ${label.toLowerCase()}`}
          onClick={onRemove}
        >
          <closeIcon.react tag="span" />
        </button>
      ) : (
        <span />
      )}
    </div>
  );
}

export function LaunchForm({
  commands
}: {
  commands: CommandRegistry;
}): JSX.Element {
  const [name, setName] = React.useState('dev');
  const [head, setHead] = React.useState<INodeSpec>({
    num_cpus: 2,
    num_gpus: 0
  });
  const [workers, setWorkers] = React.useState<INodeSpec[]>([]);
  const [lifetime, setLifetime] = React.useState<Lifetime>('server');
  const [pending, run] = usePending();

  const onSubmit = async (event: React.FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const request: ILocalRequest = {
      kind: 'local',
      name: name.trim(),
      head,
      workers,
      lifetime
    };
    await run(() => commands.execute(CommandIDs.launch, request as any));
  };

  const setWorker = (index: number, spec: INodeSpec) =>
    setWorkers(workers.map((w, i) => (i === index ? spec : w)));

  return (
    <form className="eugo-Form eugo-LaunchForm" onSubmit={onSubmit}>
      <ClusterNameField value={name} onChange={setName} />
      <div className="eugo-NodeGrid" role="group" aria-label="Nodes">
        <span className="eugo-NodeGrid-heading">Node</span>
        <span className="eugo-NodeGrid-heading">CPUs</span>
        <span className="eugo-NodeGrid-heading">GPUs</span>
        <span />
        <NodeRow label="Head" spec={head} onChange={setHead} />
        {workers.map((spec, index) => (
          <NodeRow
            key={index}
            label={`Worker ${index + 1}`}
            spec={spec}
            onChange={s => setWorker(index, s)}
            onRemove={() => setWorkers(workers.filter((_, i) => i !== index))}
          />
        ))}
      </div>
      <button
        type="button"
        className="eugo-LinkButton"
        onClick={() => setWorkers([...workers, { num_cpus: 1, num_gpus: 0 }])}
      >
        <addIcon.react tag="span" className="eugo-LinkButton-icon" />
        Add worker node
      </button>
      <LifetimeField
        value={lifetime}
        onChange={setLifetime}
        group="eugo-lifetime"
      />
      <FormActions pending={pending} label="Launch" pendingLabel="Launching…" />
    </form>
  );
}

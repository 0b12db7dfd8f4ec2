// The connect form: attach to a Ray cluster that already runs, by its GCS address or ray://.
import { CommandRegistry } from '@lumino/commands';
import * as React from 'react';

import { IConnectRequest } from '../api';
import { CommandIDs } from '../commands';
import { FormActions, TextField, usePending } from './fields';

// host:port or ray://host:port; the server checks it properly and answers 400 with a reason.
const ADDRESS_PATTERN = '(ray://)?[A-Za-z0-9.\\-_\\[\\]:]+:[0-9]{1,5}';

export function ConnectForm({ commands }: { commands: CommandRegistry }): JSX.Element {
  const [address, setAddress] = React.useState('');
  const [name, setName] = React.useState('');
  const [pending, run] = usePending();

  const onSubmit = async (event: React.FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const request: IConnectRequest = { kind: 'connect', address: address.trim() };
    if (name.trim()) {
      request.name = name.trim();
    }
    const model = await run(() => commands.execute(CommandIDs.connect, request as any));
    if (model) {
      setAddress('');
      setName('');
    }
  };

  return (
    <form className="eugo-Form eugo-ConnectForm" onSubmit={onSubmit}>
      <TextField
        label="Address"
        ariaLabel="Cluster address"
        required
        placeholder="10.0.0.5:6379 or ray://head:10001"
        pattern={ADDRESS_PATTERN}
        title="host:port of the cluster's GCS, or ray://host:port"
        value={address}
        onChange={setAddress}
      />
      <TextField
        label="Name"
        ariaLabel="Connection name"
        placeholder="optional"
        value={name}
        onChange={setName}
      />
      <FormActions pending={pending} label="Connect" pendingLabel="Connecting…" />
    </form>
  );
}

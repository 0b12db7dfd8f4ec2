import './base.css';
import './card.css';
import './slurm.css';
import './findings.css';
import './ssh.css';
import './live.css';

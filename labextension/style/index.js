import './base.css';
import './card.css';
import './findings.css';
